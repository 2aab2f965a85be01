# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host-side experiment (GPU peer-to-peer through the hypervisor): its plan and its keep/revert decision."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._experiment import (
    ExperimentError,
    host_decide,
    host_plan,
)

CLIQUE = {'gpu_p2p_clique': {'description': 'one clique', 'vars': {'proxmox_gpu_vm_clique': 0}}}
EVIDENCE = ['4096 B: correct, 24.5 us, 0.17 GB/s bus', 'P2P access matrix: [[true, true], [true, true]]']
P2P_OK = [['X', 'OK'], ['OK', 'X']]
P2P_NS = [['X', 'NS'], ['NS', 'X']]
CHECK_OK = {'ok': True, 'failure': None, 'p2p_all_pairs': True, 'p2p_access': [[True, True], [True, True]]}
TOPOLOGY_OK = {'all_pairs_p2p': True, 'p2p_read': P2P_OK}


def test_the_plan_returns_the_overlay():
    assert host_plan(CLIQUE, 'gpu_p2p_clique') == {
        'name': 'gpu_p2p_clique', 'description': 'one clique', 'vars': {'proxmox_gpu_vm_clique': 0}}


@pytest.mark.parametrize('experiments, name, message', [
    (CLIQUE, 'gpu_p2p', "serving_host_experiment must be one of gpu_p2p_clique (got 'gpu_p2p')"),
    ({'x': {'vars': {'proxmox_gpu_vm_clique': 0}, 'requires': []}}, 'x',
     'serving_host_experiments.x has unknown keys requires; allowed: description, vars'),
    ({'x': {'vars': {}}}, 'x', 'serving_host_experiments.x.vars must map variables of the VM'),
    ({'x': {'vars': {'proxmox_gpu_vm_cpu': 'host'}}}, 'x',
     'serving_host_experiments.x.vars.proxmox_gpu_vm_cpu is not a per-VM variable of inferops.serving.proxmox_gpu_vm'),
    (['gpu_p2p_clique'], 'gpu_p2p_clique', 'serving_host_experiments must be a mapping'),
])
def test_a_bad_entry_is_refused_naming_what_to_change(experiments, name, message):
    with pytest.raises(ExperimentError) as err:
        host_plan(experiments, name)
    assert message in str(err.value)


def test_right_sums_and_p2p_on_every_pair_by_both_matrices_is_kept():
    verdict = host_decide(CHECK_OK, TOPOLOGY_OK, EVIDENCE)
    assert verdict['keep'] is True
    assert verdict['reason'] == 'every sum right and P2P on every pair'
    assert verdict['evidence'] == EVIDENCE + ['driver P2P read matrix: [["X", "OK"], ["OK", "X"]]']


def test_wrong_sums_roll_back_with_the_checks_message_although_p2p_is_present():
    check = dict(CHECK_OK, ok=False, failure={'kind': 'wrong_result', 'msg': 'the all-reduce returned wrong sums'})
    verdict = host_decide(check, TOPOLOGY_OK, EVIDENCE)
    assert verdict['keep'] is False
    assert verdict['reason'] == 'the all-reduce returned wrong sums'
    assert 'P2P access matrix: [[true, true], [true, true]]' in verdict['evidence']


@pytest.mark.parametrize('check, topology', [
    # The driver says no P2P although the check could access every peer.
    (CHECK_OK, {'all_pairs_p2p': False, 'p2p_read': P2P_NS}),
    # The check's own matrix says no, the driver says yes.
    (dict(CHECK_OK, p2p_all_pairs=False, p2p_access=[[True, False], [False, True]]), TOPOLOGY_OK),
    # Unknown is not yes.
    (dict(CHECK_OK, p2p_all_pairs=None), dict(TOPOLOGY_OK, all_pairs_p2p=None)),
])
def test_p2p_missing_on_a_pair_by_either_matrix_rolls_back_naming_both(check, topology):
    verdict = host_decide(check, topology, EVIDENCE)
    assert verdict['keep'] is False
    assert verdict['reason'].startswith('P2P is not present on every pair (driver: ')
    assert ', check: ' in verdict['reason']


def test_a_failed_step_is_the_reason_first_and_keeps_what_evidence_there_is():
    verdict = host_decide(None, None, [], error='Wait for the guest to answer failed: timed out ')
    assert verdict == {'keep': False, 'reason': 'Wait for the guest to answer failed: timed out', 'evidence': []}
