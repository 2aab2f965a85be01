# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._experiment import (
    ExperimentError,
    merge,
    plan,
    refusal_message,
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
    assert '-e force=true' in message


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
    ([], 'x', 'must be a mapping'),
])
def test_bad_definitions_fail_with_what_to_change(experiments, name, message):
    with pytest.raises(ExperimentError, match=message):
        plan(experiments, name, NO_P2P)


def test_a_misspelt_overlay_variable_is_named_with_the_closest_one():
    known = ['sglang_sm120_allreduce_fusion_patch', 'sglang_server_extra_args', 'gpu_vm_force']
    assert plan(FUSION, 'sm120_allreduce_fusion', NVLINK, known_variables=known)['overlay']
    typo = {'x': {'vars': {'sglang_sm120_allreduce_fusion_pacth': True}}}
    with pytest.raises(ExperimentError, match='x.vars.sglang_sm120_allreduce_fusion_pacth is not a variable of the '
                                              'roles; did you mean sglang_sm120_allreduce_fusion_patch'):
        plan(typo, 'x', NVLINK, known_variables=known)
