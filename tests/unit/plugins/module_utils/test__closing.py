# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The closing words of experiments and deploys that did not go through."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._closing import (
    STAYS_OUT_OF_ROUTER, campaign, deploy, experiment, hold_back, host_experiment, message, one_line, plan, serving_now,
    stopped_by,
)

PLAN = {'name': 'nccl_min_nchannels_16', 'refused': False,
        'restore': {'sglang_server_extra_env': {}, 'sglang_server_extra_args': {}}}
ROLLED_BACK = {'verdict': 'rolled_back', 'message': 'throughput regressed -12.0%, more than the allowed 10%'}
RUNNING = 'ActiveState=active\nMainPID=4242\nExecStart={ path=/opt/sglang/bin/sglang-launch ; argv[]=... }\n'
RESTARTED = RUNNING.replace('4242', '5151')
STOPPED = 'ActiveState=inactive\nMainPID=0\nExecStart=\n'


@pytest.mark.parametrize('decision', [None, {'verdict': 'kept'}, {'verdict': 'inconclusive'}])
def test_a_kept_or_inconclusive_experiment_or_check_mode_has_nothing_to_close(decision):
    assert experiment('nccl_min_nchannels_16', 'gpu-node', 'sglang.service', PLAN, decision) is None


def test_a_rolled_back_experiment_names_its_variables_and_says_the_baseline_serves():
    closing = experiment('nccl_min_nchannels_16', 'gpu-node', 'sglang.service', PLAN, ROLLED_BACK)
    assert closing == {
        'what': 'Experiment nccl_min_nchannels_16 rolled back',
        'reason': ROLLED_BACK['message'],
        'change': "nothing on the node (the inventory is still its baseline); to try it again, change the experiment's "
                  "variables (sglang_server_extra_env, sglang_server_extra_args)",
        'serving': 'The baseline is running and healthy again: the node serves as before.'}


def test_a_refused_experiment_says_how_to_force_it():
    failure = {'task': 'Stop with the reasons', 'msg': 'experiment sm120_allreduce_fusion is ruled out'}
    closing = experiment('sm120_allreduce_fusion', 'gpu-node', 'sglang.service', dict(PLAN, refused=True), None, failure)
    assert closing['what'] == 'Experiment sm120_allreduce_fusion refused'
    assert closing['reason'] == failure['msg']
    assert '-e serving_experiment_force=true' in closing['change']
    assert closing['serving'] == 'The node serves as before: the experiment was refused before anything changed.'


@pytest.mark.parametrize('planned', [None, PLAN])
def test_a_stopped_experiment_names_the_task_and_how_to_get_the_baseline_back(planned):
    failure = {'task': 'Take the node lock before anything changes', 'msg': 'held by deploy since 05:00'}
    closing = experiment('nccl_min_nchannels_16', 'gpu-node', 'sglang.service', planned, None, failure)
    assert closing['what'] == 'Experiment nccl_min_nchannels_16 stopped'
    assert closing['reason'] == 'Take the node lock before anything changes: held by deploy since 05:00'
    assert closing['serving'] == ('This run could not verify that the node serves as before: check it (journalctl -u '
                                  'sglang.service), and run deploy.yml -l gpu-node to put the baseline back.')
    assert closing['also'] == ''


def test_an_experiment_or_campaign_stopped_after_the_drain_says_the_node_stays_out_of_the_router():
    failure = {'task': 'Converge the stack with the overlay', 'msg': 'the server did not become healthy'}
    stopped = experiment('nccl_min_nchannels_16', 'gpu-node', 'sglang.service', PLAN, None, failure, out_of_router=True)
    assert stopped['also'] == STAYS_OUT_OF_ROUTER
    assert campaign('pcie_throughput', 'gpu-node', failure, locked=True, out_of_router=True)['also'] == STAYS_OUT_OF_ROUTER
    assert message(stopped, 'gpu-node', 'sglang.service').endswith(STAYS_OUT_OF_ROUTER)


FAILED = {'task': 'Wait for the server', 'msg': 'timed out', 'arguments_refused': False}
REFUSED = {'task': 'Check the server arguments', 'msg': 'unknown: --foo', 'arguments_refused': True}


def test_a_refused_deploy_names_the_arguments_to_change_without_the_task():
    closing = deploy(REFUSED, '0.5.23')
    assert closing['what'] == 'Deploy refused (release set 0.5.23)'
    assert closing['reason'] == 'unknown: --foo'
    assert closing['change'].startswith('change or remove these server arguments in sglang_server_args')
    assert closing['change'].endswith(', then run deploy.yml again')


def test_a_stopped_deploy_names_the_task_and_leaves_what_the_node_serves_to_the_read_at_the_end():
    closing = deploy(FAILED, '0.5.9')
    assert closing['what'] == 'Deploy stopped (release set 0.5.9)'
    assert closing['reason'] == 'Wait for the server: timed out'
    assert closing['change'] == 'what the message says, then run deploy.yml again'
    assert closing['also'] == ''
    # What the node serves is not the deploy's to say: the closing step reads it (serving_now).
    assert sorted(closing) == ['also', 'change', 'reason', 'what']


def test_a_node_out_of_the_router_stays_out():
    assert deploy(FAILED, '0.5.9', out_of_router=True)['also'] == 'It stays out of the router until a deploy of it succeeds.'


# As systemctl show writes ExecStart: the times and PID of its last start follow the command line.
EXEC_START = ('ExecStart={ path=/opt/sglang/bin/sglang-launch ; argv[]=/opt/sglang/bin/sglang-launch --port 8000 ; '
              'ignore_errors=no ; start_time=[%s] ; stop_time=[n/a] ; pid=%s ; code=(null) ; status=0/0 }\n')
BEFORE_REBOOT = 'ActiveState=active\nMainPID=4242\n' + EXEC_START % ('Fri 2026-12-04 09:00:00 UTC', 4242)
REBOOTED = 'ActiveState=active\nMainPID=6161\n' + EXEC_START % ('Fri 2026-12-04 09:05:00 UTC', 6161)


@pytest.mark.parametrize('before, after, restarted_by, serving', [
    (None, '', '', 'Nothing was changed on the node.'),
    (RUNNING, RUNNING, '', 'The node serves as before: sglang.service still runs the same process (PID 4242) on the same '
                           'command line.'),
    (STOPPED, STOPPED, '', 'The node served nothing before this run, and serves nothing now.'),
    (RUNNING, RESTARTED, '', 'The node does not serve as before: sglang.service was restarted or changed; see the error '
                             'above and the journal (journalctl -u sglang.service).'),
    (RUNNING, STOPPED, '', 'The node does not serve as before: sglang.service is not running; see the error above and the '
                           'journal (journalctl -u sglang.service).'),
    (RUNNING, '', '', 'The node does not serve as before: sglang.service is not running; see the error above and the '
                      'journal (journalctl -u sglang.service).'),
    # A VM's restart runs the same command line again: as before, whatever systemd adds to ExecStart.
    (BEFORE_REBOOT, REBOOTED, 'the restart of its VM',
     'The node serves as before: sglang.service runs the same command line again (PID 6161), restarted by the restart '
     'of its VM.'),
    (BEFORE_REBOOT, STOPPED, 'the restart of its VM',
     'The node does not serve as before: sglang.service is not running; see the error above and the journal '
     '(journalctl -u sglang.service).'),
    (BEFORE_REBOOT, REBOOTED.replace('--port 8000', '--port 9000'), 'the restart of its VM',
     'The node does not serve as before: sglang.service was restarted or changed; see the error above and the journal '
     '(journalctl -u sglang.service).'),
])
def test_what_the_node_serves_at_the_end_of_a_failed_run(before, after, restarted_by, serving):
    assert serving_now('sglang.service', before, after, restarted_by) == serving


WRONG_SUMS = {'keep': False, 'reason': 'the all-reduce returned wrong sums', 'evidence': ['first: element 0 on rank 0']}


@pytest.mark.parametrize('verdict', [None, {'keep': True, 'reason': 'every sum right and P2P on every pair'}])
def test_a_kept_host_experiment_or_check_mode_has_nothing_to_close(verdict):
    assert host_experiment('gpu_p2p_clique', 100, 'pve1', verdict, None, locked=True) is None


def test_a_rolled_back_host_experiment_says_the_host_is_back_and_that_its_vm_restarted():
    closing = host_experiment('gpu_p2p_clique', 100, 'pve1', WRONG_SUMS, None, locked=True, out_of_router=True)
    assert closing['what'] == 'Host experiment gpu_p2p_clique rolled back (VM 100 on pve1)'
    assert closing['reason'] == 'the all-reduce returned wrong sums'
    assert closing['change'].startswith("nothing: the host is back on the inventory's passthrough")
    # The node rejoined the router after the rollback: nothing more to say of it.
    assert (closing['serving'], closing['restarted_by'], closing['also']) == ('', 'the restart of its VM', '')


def test_a_host_experiment_refused_before_the_lock_changed_nothing():
    failure = {'task': 'Check that the VM says where it runs and what it is', 'msg': 'gpu-node needs proxmox_gpu_vm_host'}
    closing = host_experiment('gpu_p2p_clique', '?', '', None, failure, locked=False, out_of_router=True)
    assert closing['what'] == 'Host experiment gpu_p2p_clique refused (VM ? on its host)'
    # The refusal's own words, without the task that said them.
    assert closing['reason'] == 'gpu-node needs proxmox_gpu_vm_host'
    assert closing['serving'] == 'Nothing was changed on the node or its host; it serves as before.'
    assert closing['also'] == ''


@pytest.mark.parametrize('out_of_router, also', [(True, 'It stays out of the router until a deploy of it succeeds.'), (False, '')])
def test_a_host_experiment_stopped_under_the_lock_names_the_task_and_how_to_put_the_passthrough_back(out_of_router, also):
    failure = {'task': 'Wait for the guest', 'msg': 'timed out after 600 s'}
    closing = host_experiment('gpu_p2p_clique', 100, 'pve1', None, failure, locked=True, out_of_router=out_of_router)
    assert closing['what'] == 'Host experiment gpu_p2p_clique stopped (VM 100 on pve1)'
    assert closing['reason'] == 'Wait for the guest: timed out after 600 s'
    assert 'playbooks/proxmox_gpu_vm.yml -e proxmox_gpu_vm_reboot=true' in closing['change']
    # What the node serves is read at the end of the run (serving_now), not said here.
    assert (closing['serving'], closing['restarted_by'], closing['also']) == ('', '', also)


def test_a_campaign_refused_before_the_lock_says_the_node_serves_as_before():
    closing = campaign('no_such_campaign', 'gpu-node', {'task': 'Resolve the campaign', 'msg': "unknown campaign 'no_such_campaign'"})
    assert closing == {'what': 'Campaign no_such_campaign refused', 'reason': "unknown campaign 'no_such_campaign'",
                       'change': 'what the message says, then run the campaign again',
                       'serving': 'Nothing was changed on the node; it serves as before.'}


@pytest.mark.parametrize('task, reason', [('Benchmark the experiment', 'Benchmark the experiment: the server did not answer'),
                                          ('', 'the server did not answer')])
def test_a_campaign_stopped_under_the_lock_names_the_task_and_how_to_get_the_baseline_back(task, reason):
    closing = campaign('pcie_throughput', 'gpu-node', {'task': task, 'msg': 'the server did not answer'}, locked=True)
    assert closing['what'] == 'Campaign pcie_throughput stopped' and closing['reason'] == reason
    assert closing['change'].endswith('deploy.yml -l gpu-node puts back the baseline of the inventory')
    # What the node serves is read at the end of the run (serving_now), not said here.
    assert closing['serving'] == ''
    assert closing['also'] == ''


GATE = ('GPU health gate: the GPUs of gpu-3 are not fit to serve: GPU 2 asks for recovery action Reset.'
        ' What to do: reset GPU 2 (nvidia-smi -r -i 2) or power-cycle the VM, then deploy again.')


def test_a_held_back_node_says_what_the_gate_found_and_what_to_do_and_that_it_left_the_router():
    closing = hold_back('gpu-3', GATE, routed=True)
    assert closing == {
        'what': 'Deploy held back (GPUs not fit to serve)',
        'reason': 'GPU health gate: the GPUs of gpu-3 are not fit to serve: GPU 2 asks for recovery action Reset.',
        'change': 'reset GPU 2 (nvidia-smi -r -i 2) or power-cycle the VM, then deploy again.',
        'also': 'gpu-3 is out of the router; the other nodes are deployed without it.'}


def test_a_held_back_node_that_could_not_leave_the_router_says_so():
    closing = hold_back('gpu-3', GATE, routed=True, failure={'task': 'Take the node out of the router', 'msg': 'connection refused'})
    assert closing['reason'].endswith(' Taking it out of the router failed: Take the node out of the router: connection refused')
    assert closing['also'] == 'gpu-3 may still be in the router; the other nodes are deployed without it.'


def test_a_held_back_node_without_a_router_or_advice_falls_back_to_the_gate():
    closing = hold_back('gpu-3', 'GPU health gate: GPU 0 is lost.', routed=False)
    assert closing['reason'] == 'GPU health gate: GPU 0 is lost.'
    assert closing['change'] == 'what the GPU health gate says'
    assert closing['also'] == 'the other nodes are deployed without it.'


# As plugins/modules/sglang_server_args.py refuses arguments, and as ansible-core 2.19 frames a filter's refusal.
REFUSED_ARGUMENTS = ('The SGLang 0.5.23 installed here does not accept these server arguments:\n'
                     '- dsa-decode-backend: invalid choice: no-such-backend\n- tp-size: 0 is not a positive int.')
FILTER_REFUSAL = ("Task failed: Finalization of task args for 'ansible.builtin.set_fact' failed: Error while resolving"
                  " value for '__serving_plan': The filter plugin 'inferops.serving.experiment_plan' failed: unknown"
                  " experiment 'no_such'; known: allreduce_fusion.")


@pytest.mark.parametrize('reason, line', [
    (REFUSED_ARGUMENTS, 'The SGLang 0.5.23 installed here does not accept these server arguments: dsa-decode-backend: '
                        'invalid choice: no-such-backend; tp-size: 0 is not a positive int'),
    (FILTER_REFUSAL, "unknown experiment 'no_such'; known: allreduce_fusion"),
    ('the server did not answer\n  within 600 s.  ', 'the server did not answer within 600 s'),
    (['a list', 'said as it is'], "['a list', 'said as it is']"),
])
def test_a_reason_is_said_on_one_line_without_its_full_stop_or_ansibles_frame(reason, line):
    assert one_line(reason) == line


def test_a_refused_deploy_says_what_when_why_what_to_change_and_what_the_node_serves_in_one_line():
    closing = deploy({'task': 'Check the server arguments', 'msg': REFUSED_ARGUMENTS, 'arguments_refused': True},
                     '0.5.23', out_of_router=True)
    said = message(closing, 'gpu-1', 'sglang.service', RUNNING, RUNNING)
    assert said == (
        'Deploy refused (release set 0.5.23) on gpu-1: The SGLang 0.5.23 installed here does not accept these server'
        ' arguments: dsa-decode-backend: invalid choice: no-such-backend; tp-size: 0 is not a positive int. What to'
        ' change: change or remove these server arguments in sglang_server_args or sglang_server_extra_args, or deploy'
        ' a release set whose SGLang accepts them (sglang_release_set), then run deploy.yml again. The node serves as'
        ' before: sglang.service still runs the same process (PID 4242) on the same command line. ' + STAYS_OUT_OF_ROUTER)
    assert '\n' not in said


def test_what_the_caller_knows_the_node_serves_is_said_without_reading_the_unit():
    closing = plan('gpu-1', 'serving_port: 70000 is not a port.')
    said = message(closing, 'gpu-1', 'sglang.service', None, '')
    assert said.endswith('What to change: the input the message names, then run deploy.yml again. Nothing was changed'
                         ' on any node; each serves as it did before this run.'), said


def test_a_vm_restart_the_closing_names_informs_what_the_node_serves():
    closing = host_experiment('p2p', 101, 'pve1', {'keep': False, 'reason': 'no P2P', 'evidence': []}, locked=True)
    said = message(closing, 'gpu-1', 'sglang.service', BEFORE_REBOOT, REBOOTED)
    assert said.endswith('restarted by the restart of its VM.'), said
    assert message(closing, 'gpu-1', 'sglang.service', BEFORE_REBOOT, STOPPED).endswith('(journalctl -u sglang.service).')


@pytest.mark.parametrize('refused, change', [
    (True, 'change or remove these server arguments in sglang_server_args or sglang_server_extra_args, then run '
           'deploy.yml again'),
    (False, 'the input the message names, then run deploy.yml again'),
])
def test_a_plan_refused_on_this_node_changed_nothing_anywhere(refused, change):
    assert plan('gpu-1', 'why', refused) == {
        'what': 'Deploy refused before anything changed', 'reason': 'why', 'change': change,
        'serving': 'Nothing was changed on any node; each serves as it did before this run.'}


def test_a_plan_that_failed_on_other_nodes_names_them():
    assert plan('gpu-1', failed_nodes=['gpu-2', 'gpu-3']) == {
        'what': 'Deploy stopped before anything changed',
        'reason': 'the plan failed on gpu-2, gpu-3, and every node plans before any changes',
        'change': 'what the message of gpu-2, gpu-3 says',
        'serving': 'Nothing was changed on gpu-1 or any other node; each serves as it did before this run.'}


def test_what_stopped_a_run_is_the_task_and_its_message_and_nothing_else_of_the_result():
    result = {'msg': 'non-zero return code', 'rc': 1, 'cmd': ['sglang-launch', '--api-key', 'sk-secret'],
              'stderr': 'sk-secret', 'invocation': {'module_args': {'api_key': 'sk-secret'}}}
    assert stopped_by(result, {'name': 'Restart the server', 'action': 'systemd'}, 'the deploy failed') == {
        'task': 'Restart the server', 'msg': 'non-zero return code', 'arguments_refused': False}


@pytest.mark.parametrize('result', [{}, {'msg': ''}, {'msg': None}, None])
def test_a_stop_without_a_message_says_the_fallback(result):
    assert stopped_by(result, None, 'the campaign failed') == {
        'task': '', 'msg': 'the campaign failed', 'arguments_refused': False}


def test_a_stop_by_the_installed_sglang_refusing_the_arguments_says_so():
    note = stopped_by({'msg': "--tp-size: invalid int value: 'eight'", 'errors': ['--tp-size']}, {'name': 'Validate'})
    assert note['arguments_refused'] and note['msg'] == "--tp-size: invalid int value: 'eight'"


def test_a_message_that_is_not_text_is_said_as_text():
    assert stopped_by({'msg': ['first', 'second']})['msg'] == "['first', 'second']"
