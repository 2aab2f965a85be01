# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._fleet import (
    FleetError,
    node_plan_state,
    replica_rollout,
    replica_settings,
    rollout_batches,
)

GROUPS = {'glm5_a': ['gpu-a0', 'gpu-a1'], 'single': ['gpu-s'], 'gpu_nodes': ['gpu-1', 'gpu-a0', 'gpu-a1']}


def test_a_node_on_its_own_is_rank_0_without_arguments():
    assert replica_settings('gpu-1', '', GROUPS, '10.0.0.1', 20000) == {
        'rank': 0, 'nnodes': 1, 'nodes': ['gpu-1'], 'args': {}}


@pytest.mark.parametrize('host, rank', [('gpu-a0', 0), ('gpu-a1', 1)])
def test_ranks_follow_the_group_order(host, rank):
    result = replica_settings(host, 'glm5_a', GROUPS, '10.0.0.11', 20000)
    assert result['rank'] == rank
    assert result['args'] == {'nnodes': 2, 'node-rank': rank, 'dist-init-addr': '10.0.0.11:20000'}


def test_ipv6_rendezvous_is_bracketed():
    assert replica_settings('gpu-a1', 'glm5_a', GROUPS, 'fd00::11', 20000)['args']['dist-init-addr'] == '[fd00::11]:20000'


@pytest.mark.parametrize('host, group, message', [
    ('gpu-a0', 'glm5_b', 'is not an inventory group'),
    ('gpu-1', 'glm5_a', 'is not in that group'),
    ('gpu-s', 'single', 'needs two or more'),
])
def test_bad_replica_groups_are_named(host, group, message):
    with pytest.raises(FleetError, match=message):
        replica_settings(host, group, GROUPS, '10.0.0.11', 20000)


def test_replica_nodes_share_a_batch_whatever_the_play_order():
    result = rollout_batches(['gpu-a1', 'gpu-1', 'gpu-a0', 'gpu-2'],
                             {'gpu-a0': 'glm5_a', 'gpu-a1': 'glm5_a'}, 1)
    assert result == {'hosts': ['gpu-a1', 'gpu-a0', 'gpu-1', 'gpu-2'], 'sizes': [2, 1, 1]}


def test_several_replicas_per_batch():
    result = rollout_batches(['gpu-1', 'gpu-a0', 'gpu-a1', 'gpu-2'], {'gpu-a0': 'glm5_a', 'gpu-a1': 'glm5_a'}, 2)
    assert result['sizes'] == [3, 1]


def test_no_changing_node_gives_one_empty_batch_size():
    assert rollout_batches([], {}, 1) == {'hosts': [], 'sizes': [1]}


def test_serial_below_one_is_refused():
    with pytest.raises(FleetError, match='1 or more'):
        rollout_batches(['gpu-1'], {}, 0)


@pytest.mark.parametrize('deployed, restart, state', [
    (False, False, 'new'), (False, True, 'new'), (True, True, 'changes'), (True, False, 'current')])
def test_a_node_is_new_until_deployed_then_changes_only_when_its_server_would_restart(deployed, restart, state):
    assert node_plan_state(deployed, restart) == state


@pytest.mark.parametrize('plan, path', [
    ({'a': 'new', 'b': 'new'}, 'new'),
    ({'a': 'current', 'b': 'current'}, 'current'),
    # One node deployed before: the replica serves, so it restarts a batch at a time, drained.
    ({'a': 'new', 'b': 'current'}, 'changes'),
    ({'a': 'current', 'b': 'changes'}, 'changes'),
    # No answer for a node (its check did not run), or an answer not understood: the careful path.
    ({'a': 'new'}, 'changes'),
    ({'a': 'current', 'b': True}, 'changes'),
    # A node whose GPUs are not fit to serve holds its whole replica back, whatever the other says.
    ({'a': 'unfit', 'b': 'current'}, 'unfit'),
    ({'a': 'changes', 'b': 'unfit'}, 'unfit'),
    ({'a': 'unfit'}, 'unfit'),
])
def test_a_replica_takes_the_path_of_its_nodes(plan, path):
    assert replica_rollout(['a', 'b'], plan) == path
