# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._experiment import (
    ExperimentError,
    decide,
    host_check_runtime,
    host_report,
    merge,
    plan,
    refusal_message,
    role_options,
)

FUSION = {
    'sm120_allreduce_fusion': {
        'description': 'FlashInfer allreduce fusion on SM120',
        'requires': ['allreduce_fusion_advised'],
        'vars': {'sglang_sm120_allreduce_fusion_patch': True,
                 'sglang_server_extra_args': {'enable-flashinfer-allreduce-fusion': True}},
    },
    'more_requests': {'vars': {'sglang_server_extra_args': {'max-running-requests': 2048}}},
}
NO_P2P = {'allreduce_fusion_advised': False, 'all_pairs_p2p': False,
          'reasons': ['allreduce fusion not advised: P2P is missing between GPU pairs']}
NVLINK = {'allreduce_fusion_advised': True, 'reasons': ['every pair has P2P']}


def test_the_seed_topology_refuses_the_fusion_experiment_with_reasons():
    planned = plan(FUSION, 'sm120_allreduce_fusion', NO_P2P)
    assert planned['refused'] and not planned['forced']
    assert planned['blocked_by'] == ['allreduce_fusion_advised is false']
    message = refusal_message(planned, 'gpu-node')
    assert 'ruled out by the GPU topology of gpu-node' in message
    assert 'P2P is missing between GPU pairs' in message
    assert '-e serving_experiment_force=true' in message


def test_force_runs_a_ruled_out_experiment_and_says_so():
    planned = plan(FUSION, 'sm120_allreduce_fusion', NO_P2P, force=True)
    assert not planned['refused'] and planned['forced']
    assert planned['overlay']['sglang_sm120_allreduce_fusion_patch'] is True


def test_a_topology_that_allows_it_is_not_refused():
    planned = plan(FUSION, 'sm120_allreduce_fusion', NVLINK)
    assert not planned['refused'] and not planned['forced'] and planned['reasons'] == []


def test_a_missing_fact_blocks_rather_than_passes():
    planned = plan(FUSION, 'sm120_allreduce_fusion', {})
    assert planned['refused']
    assert 'unknown' in planned['blocked_by'][0]


def test_mapping_overlays_add_to_the_inventory_values():
    current = {'sglang_server_extra_args': {'max-running-requests': 1024, 'log-level': 'info'}}
    planned = plan(FUSION, 'more_requests', NO_P2P, current=current)
    assert planned['overlay'] == {'sglang_server_extra_args': {'max-running-requests': 2048, 'log-level': 'info'}}
    assert not planned['refused']


def test_merge_replaces_non_mappings():
    assert merge({'a': {'b': 1, 'c': 2}}, {'a': {'b': 3}}) == {'a': {'b': 3, 'c': 2}}
    assert merge([1], [2]) == [2]
    assert merge(None, {'a': 1}) == {'a': 1}


@pytest.mark.parametrize('experiments, name, message', [
    (FUSION, 'sm120_allreduce_fusoin', "unknown experiment 'sm120_allreduce_fusoin'; known: more_requests, "
                                       "sm120_allreduce_fusion"),
    (FUSION, '', 'say which experiment'),
    ({'x': {'vars': {}}}, 'x', 'x.vars must map'),
    ({'x': {'vars': {'a': 1}, 'requries': []}}, 'x', 'unknown keys requries'),
    ({'x': {'vars': {'a-b': 1}}}, 'x', 'not variable names: a-b'),
    ({'x': {'vars': {'a': 1}, 'requires': 'nvlink'}}, 'x', 'requires must be a list'),
    ({'x': {'vars': {'a': 1}, 'inconclusive': 'stay'}}, 'x', "x.inconclusive must be rollback or keep, got 'stay'"),
    ([], 'x', 'must be a mapping'),
])
def test_bad_definitions_fail_with_what_to_change(experiments, name, message):
    with pytest.raises(ExperimentError, match=message):
        plan(experiments, name, NO_P2P)


def test_an_experiment_may_say_what_stays_when_its_change_is_within_the_noise():
    upgrade = {'upgrade': {'vars': {'sglang_release_set': '0.5.23'}, 'inconclusive': 'keep'}}
    assert plan(upgrade, 'upgrade', NO_P2P)['inconclusive'] == 'keep'
    # Without it, serving_gate_inconclusive decides.
    assert plan(FUSION, 'more_requests', NO_P2P)['inconclusive'] is None


def test_a_misspelt_overlay_variable_is_named_with_the_closest_one():
    known = ['sglang_sm120_allreduce_fusion_patch', 'sglang_server_extra_args', 'gpu_vm_force']
    assert plan(FUSION, 'sm120_allreduce_fusion', NVLINK, known_variables=known)['overlay']
    typo = {'x': {'vars': {'sglang_sm120_allreduce_fusion_pacth': True}}}
    with pytest.raises(ExperimentError, match='x.vars.sglang_sm120_allreduce_fusion_pacth is not a variable of the '
                                              'roles; did you mean sglang_sm120_allreduce_fusion_patch'):
        plan(typo, 'x', NVLINK, known_variables=known)


SEED_BASELINE = {'output_throughput': 1867.0, 'gpu': {'mean_power_w': 250.0}}
SEED_FUSION = {'output_throughput': 236.0, 'completed': 64, 'gpu': {'mean_power_w': 125.0}}


def test_decide_rolls_back_the_seed_regression_naming_both_numbers():
    decision = decide(SEED_BASELINE, SEED_FUSION, 0.1, healthy=True)
    assert decision['action'] == 'rollback'
    assert decision['reason'] == 'regression'
    assert decision['change_pct'] == pytest.approx(-87.4)
    assert '1,867.0 tok/s' in decision['message'] and '236.0 tok/s' in decision['message']
    assert '250 W -> 125 W' in decision['message']


@pytest.mark.parametrize('candidate, max_regression, action', [
    (1700.0, 0.10, 'keep'),       # -8.9%: inside a 10% tolerance
    (1670.0, 0.10, 'rollback'),   # -10.6%
    (1670.0, 0.20, 'keep'),
    (1960.0, 0.0, 'keep'),        # a gain is always kept
    (1866.0, 0.0, 'rollback'),
])
def test_decide_applies_the_tolerance(candidate, max_regression, action):
    assert decide(SEED_BASELINE, {'output_throughput': candidate}, max_regression, True)['action'] == action


def test_decide_rolls_back_an_unhealthy_server_without_numbers():
    decision = decide(SEED_BASELINE, None, 0.1, healthy=False)
    assert decision['action'] == 'rollback' and decision['reason'] == 'unhealthy'
    assert '1,867.0 tok/s' in decision['message'] and 'experiment n/a' in decision['message']


@pytest.mark.parametrize('baseline, max_regression, message', [
    ({'output_throughput': 0}, 0.1, 'baseline'),
    ({}, 0.1, 'baseline'),
    (SEED_BASELINE, 10, 'fraction'),
    (SEED_BASELINE, -0.1, 'fraction'),
])
def test_decide_refuses_input_it_cannot_compare(baseline, max_regression, message):
    with pytest.raises(ExperimentError, match=message):
        decide(baseline, SEED_FUSION, max_regression, True)


def test_a_failed_converge_names_its_cause_first():
    cause = ('SM120 allreduce-fusion patch, state present: flashinfer/jit/comm.py was edited by hand '
             '(line 12 differs from both the pristine and the patched file)')
    decision = decide(SEED_BASELINE, None, 0.1, healthy=False, error=cause)
    assert decision['action'] == 'rollback' and decision['reason'] == 'failed'
    assert decision['message'].startswith(cause)
    assert 'did not become healthy' not in decision['message']


SPECS = [{'argument_specs': {'main': {'options': {
    'sglang_server_extra_args': {'type': 'dict', 'default': {}},
    'sglang_sm120_allreduce_fusion_patch': {'type': 'bool', 'default': False},
    'sglang_pristine_dir': {'type': 'path', 'default': '{{ sglang_state_dir }}/pristine'},
}}}}]


def test_the_plan_records_what_a_rollback_sets_back():
    options = role_options(SPECS)
    current = {'sglang_server_extra_args': {'max-running-requests': 512}}
    planned = plan(FUSION, 'sm120_allreduce_fusion', NVLINK, current=current,
                   known_variables=list(options), defaults=options)
    assert planned['overlay']['sglang_server_extra_args'] == {
        'max-running-requests': 512, 'enable-flashinfer-allreduce-fusion': True}
    # The inventory's value where it sets one, the documented default otherwise.
    assert planned['restore'] == {'sglang_server_extra_args': {'max-running-requests': 512},
                                  'sglang_sm120_allreduce_fusion_patch': False}


def test_an_overlay_of_a_derived_default_must_be_set_in_the_inventory_first():
    options = role_options(SPECS)
    experiments = {'move_pristine': {'vars': {'sglang_pristine_dir': '/srv/pristine'}}}
    with pytest.raises(ExperimentError, match='set sglang_pristine_dir in the inventory first'):
        plan(experiments, 'move_pristine', {}, current={}, known_variables=list(options), defaults=options)


HOST_PLAN = {'name': 'gpu_p2p_clique', 'description': '', 'vars': {'proxmox_gpu_vm_clique': 0}}


def test_a_kept_host_experiment_says_what_the_topology_calls_for_now_and_how_to_keep_it():
    verdict = {'keep': True, 'reason': 'every sum right and P2P on every pair', 'evidence': ['driver P2P read matrix: [["X", "OK"], ["OK", "X"]]']}
    lines = host_report(HOST_PLAN, verdict, 'gpu-node', 100, 'pve1', {'recommended_sglang_args': {'disable-custom-all-reduce': True}},
                        {'recommended_sglang_args': {}, 'recommended_env': {'NCCL_P2P_LEVEL': 'SYS'}})
    assert lines == [
        'Kept gpu_p2p_clique on VM 100 (pve1): every sum right and P2P on every pair.',
        'driver P2P read matrix: [["X", "OK"], ["OK", "X"]]',
        "SGLang flags the topology now calls for: {} (before: {'disable-custom-all-reduce': True}); NCCL environment: {'NCCL_P2P_LEVEL': 'SYS'}.",
        'The inventory still holds the baseline: set {"proxmox_gpu_vm_clique": 0} on gpu-node to keep it, or a run of the'
        ' proxmox_gpu_vm role reverts it.']


def test_a_rolled_back_host_experiment_says_why_with_its_evidence_and_never_that_it_was_kept():
    verdict = {'keep': False, 'reason': 'the all-reduce returned wrong sums', 'evidence': ['first: element 0 on rank 0, got 1.0, expected 3.0']}
    lines = host_report(HOST_PLAN, verdict, 'gpu-node', 100, 'pve1', {}, {})
    assert lines == ['Rolled back gpu_p2p_clique on VM 100: the all-reduce returned wrong sums',
                     'first: element 0 on rank 0, got 1.0, expected 3.0']
    assert not any(line.startswith('Kept') for line in lines)


INSTALLATION = {'venv_path': '/opt/sglang/venvs/0.5.9-1a2b3c4d', 'service_user': 'sglang', 'service_group': 'sglang'}
LATEST_DEPLOY = {'server': {'python': '/opt/sglang/venvs/0.5.9-0f0f0f0f/bin/python'}}


@pytest.mark.parametrize('python, installation, latest, chosen', [
    ('/usr/local/torch/bin/python', INSTALLATION, LATEST_DEPLOY, '/usr/local/torch/bin/python'),
    ('', INSTALLATION, LATEST_DEPLOY, '/opt/sglang/venvs/0.5.9-1a2b3c4d/bin/python'),
    ('', None, LATEST_DEPLOY, '/opt/sglang/venvs/0.5.9-0f0f0f0f/bin/python'),
    ('', None, None, ''),
    ('', None, {'server': {}}, ''),
])
def test_the_check_runs_with_the_python_asked_for_else_this_plays_venv_else_the_last_deploys(python, installation, latest, chosen):
    assert host_check_runtime(python, installation, latest, 'svc', 'svcgroup')['python'] == chosen


def test_the_history_belongs_to_the_installations_service_user_else_the_role_variables():
    assert host_check_runtime('', INSTALLATION, None, 'svc', 'svcgroup') == {
        'python': '/opt/sglang/venvs/0.5.9-1a2b3c4d/bin/python', 'owner': 'sglang', 'group': 'sglang'}
    assert host_check_runtime('', None, LATEST_DEPLOY, 'svc', 'svcgroup')['owner'] == 'svc'
    assert host_check_runtime('', None, LATEST_DEPLOY, '', '')['group'] == ''
