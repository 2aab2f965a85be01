# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an experiment's trial is measured against, records and says."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._correctness import compare
from ansible_collections.inferops.serving.plugins.module_utils._experiment import decide
from ansible_collections.inferops.serving.plugins.module_utils._trial import (
    baseline,
    host_outcome_record,
    host_rollback_record,
    outcome_record,
    report,
    restores_by_files,
    rollback_record,
)

PLAN = {'name': 'max_running_requests_2048', 'restore': {'sglang_server_extra_args': {}}}
BASELINE = {'output_throughput': 1867.0, 'tokens_per_joule': 1.2, 'completed': 200}
FASTER = {'output_throughput': 3740.0, 'tokens_per_joule': 2.1, 'completed': 200}
SLOWER = {'output_throughput': 1200.0, 'tokens_per_joule': 0.9, 'completed': 200}


def test_a_recent_history_benchmark_is_the_baseline_and_says_its_age():
    chosen = baseline({'metrics': BASELINE, 'epoch': 1000.0}, None, 1421.6)
    assert chosen == {'metrics': BASELINE, 'age_s': 422,
                      'message': 'Baseline: 1867.0 output tok/s (from the history, 422 s old).'}


def test_without_history_the_benchmark_measured_now_is_the_baseline():
    chosen = baseline(None, BASELINE, 1421.6)
    assert (chosen['metrics'], chosen['message']) == (BASELINE, 'Baseline: 1867.0 output tok/s (measured now).')


def test_in_check_mode_nothing_was_measured():
    assert baseline(None, None, 1.0) == {'metrics': {}, 'age_s': 0, 'message': 'Baseline: not measured (check mode sends the server no load).'}


@pytest.mark.parametrize('snapshot, url, expected', [
    ({'snapshot': True}, 'http://127.0.0.1:30000', True),
    ({'snapshot': True}, 'http://127.0.0.1:30001', False),
    ({'skipped': True}, 'http://127.0.0.1:30000', False),
    (None, 'http://127.0.0.1:30000', False),
])
def test_the_files_alone_are_tried_only_when_kept_and_the_server_did_not_move(snapshot, url, expected):
    assert restores_by_files(snapshot, 'http://127.0.0.1:30000', {'url': url}) is expected


def test_the_outcome_record_holds_the_verdict_both_results_and_the_answers():
    decision = decide(BASELINE, FASTER, 0.1, True)
    lock = compare(['2+2?'], [{'prompt': '2+2?', 'tokens': ['4'], 'logprobs': [-0.1]}],
                   [{'prompt': '2+2?', 'tokens': ['4'], 'logprobs': [-0.1]}], 0.9, 1.0)
    record = outcome_record(PLAN, decision, BASELINE, FASTER, lock, campaign='pcie_throughput', forced=False)
    assert record['experiment'] == 'max_running_requests_2048'
    assert record['campaign'] == 'pcie_throughput'
    assert (record['outcome'], record['reason']) == ('kept', 'within_tolerance')
    assert (record['baseline_throughput'], record['experiment_throughput']) == (1867.0, 3740.0)
    assert (record['baseline_tokens_per_joule'], record['experiment_tokens_per_joule']) == (1.2, 2.1)
    assert record['answers']['ok'] is True
    assert record['message'] == decision['message']


def test_an_experiment_that_never_served_records_no_result_of_its_own():
    decision = decide(BASELINE, None, 0.1, False)
    record = outcome_record(PLAN, decision, BASELINE, None)
    assert (record['outcome'], record['reason']) == ('rolled_back', 'unhealthy')
    assert record['experiment_throughput'] is None and record['experiment_spread'] is None
    assert record['answers'] is None


@pytest.mark.parametrize('restore, how', [
    ({'restored': True, 'files': ['/etc/systemd/system/sglang.service', '/etc/sglang/env']},
     'files put back: /etc/systemd/system/sglang.service, /etc/sglang/env'),
    ({'restored': False}, 'converged'),
])
def test_the_rollback_record_says_how_and_how_long(restore, how):
    decision = decide(BASELINE, SLOWER, 0.1, True)
    record = rollback_record(PLAN, decision, None, 'fp-1', restore, '1000.0', 1042.46)
    assert record['how'] == how
    assert record['recovery_s'] == 42.5
    assert (record['reason'], record['fingerprint'], record['error']) == ('regression', 'fp-1', None)


def test_a_kept_experiment_says_it_stays_until_the_next_deploy():
    message = report(PLAN, decide(BASELINE, FASTER, 0.1, True), 'gpu-node')
    assert message.startswith('Experiment max_running_requests_2048 kept on gpu-node: throughput +100.3%')
    assert message.endswith('It stays until the next deploy.yml; to make it the baseline, put its variables in the inventory.')


@pytest.mark.parametrize('inconclusive, stays', [
    ('rollback', 'The baseline is running again.'),
    ('keep', 'It stays until the next deploy.yml.'),
])
def test_an_inconclusive_experiment_says_what_stays(inconclusive, stays):
    spread = {'output_throughput': {'n': 3, 'mean': 1867.0, 'stdev': 60.0, 'samples': [1800.0, 1867.0, 1934.0]}}
    base = dict(BASELINE, spread=spread)
    cand = dict(BASELINE, output_throughput=1880.0, spread=spread)
    decision = decide(base, cand, 0.1, True, inconclusive=inconclusive)
    assert decision['verdict'] == 'inconclusive'
    message = report(PLAN, decision, 'gpu-node')
    assert message.startswith('Experiment max_running_requests_2048 inconclusive on gpu-node: inconclusive:')
    assert message.endswith('%s More repeats (serving_benchmark_repeats) narrow the noise.' % stays)


def test_a_rollback_and_check_mode_report_nothing_here():
    assert report(PLAN, decide(BASELINE, SLOWER, 0.1, True), 'gpu-node') is None
    assert report(PLAN, None, 'gpu-node') is None


HOST_PLAN = {'name': 'p2p_clique', 'description': '', 'vars': {'proxmox_gpu_vm_clique': 'pve-clique-0'}}
RANKS_OK = [{'rank': 0, 'ok': True}, {'rank': 1, 'ok': True}]
RANKS_WRONG = [{'rank': 0, 'ok': False}, {'rank': 1, 'ok': True}]


def _check(results):
    # As inferops.serving.nccl_allreduce_check registers its result.
    return {'changed': False, 'ansible_facts': {'nccl_allreduce_check': {'ok': True, 'results': results}}, 'evidence': []}


@pytest.mark.parametrize('keep, outcome', [(True, 'kept'), (False, 'rolled_back')])
def test_a_host_experiments_record_holds_its_verdict_its_vm_and_both_checks(keep, outcome):
    verdict = {'keep': keep, 'reason': 'why', 'evidence': ['line']}
    record = host_outcome_record(HOST_PLAN, verdict, 'pve1', '101', _check(RANKS_OK), _check(RANKS_WRONG))
    assert record == {'experiment': 'p2p_clique', 'outcome': outcome, 'layer': 'host', 'host': 'pve1', 'vmid': 101,
                      'message': 'why', 'evidence': ['line'], 'allreduce_before': RANKS_OK, 'allreduce_after': RANKS_WRONG}


def test_a_host_experiment_stopped_before_its_second_check_records_none_after_it():
    verdict = {'keep': False, 'reason': 'Restart the VM failed: timeout', 'evidence': []}
    record = host_outcome_record(HOST_PLAN, verdict, 'pve1', 101, _check(RANKS_OK), None)
    assert record['allreduce_before'] == RANKS_OK and record['allreduce_after'] == []


def test_a_host_rollback_records_why_and_the_time_until_the_guest_answered_again():
    verdict = {'keep': False, 'reason': 'P2P is not present on every pair', 'evidence': ['driver P2P read matrix: []']}
    assert host_rollback_record(HOST_PLAN, verdict, 'pve1', 101, '1000.0', 1042.26) == {
        'experiment': 'p2p_clique', 'reason': 'wrong_or_no_p2p', 'message': 'P2P is not present on every pair',
        'evidence': ['driver P2P read matrix: []'], 'host': 'pve1', 'vmid': 101, 'recovery_s': 42.3}
