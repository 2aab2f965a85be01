# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._fleet import (
    FleetError,
    node_plan,
    plan_summary,
    node_plan_state,
    replica_first_node,
    replica_init_address,
    replica_rollout,
    replica_settings,
    rollout_batches,
    router_access,
    router_member,
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


ROUTER_PUBLISHED = {
    'sglang_router_deployment': {'url': 'http://10.0.0.5:30000', 'members_file': '/srv/router/workers.json'},
    'sglang_router_admin_api_key': 'admin-key',
    'sglang_router_api_key': 'client-key',
}


def test_without_a_router_there_is_nothing_to_reach():
    assert router_access('', {}, 'http://ignored', 'ignored') == {'url': '', 'members_file': '', 'workers_key': ''}


def test_the_router_as_its_deploy_published_it_with_the_admin_key():
    assert router_access('router-1', ROUTER_PUBLISHED) == {
        'url': 'http://10.0.0.5:30000',
        'members_file': '/srv/router/workers.json', 'workers_key': 'admin-key'}


def test_the_serving_side_url_and_key_win():
    access = router_access('router-1', ROUTER_PUBLISHED, 'https://router.example:443', 'serving-key')
    assert (access['url'], access['workers_key']) == ('https://router.example:443', 'serving-key')


def test_a_router_this_run_did_not_deploy_is_found_by_its_settings():
    access = router_access('router-1', {'sglang_router_config_dir': '/opt/router', 'sglang_router_api_key': 'client-key'})
    assert access['url'] == 'http://127.0.0.1:30000'
    assert access['members_file'] == '/opt/router/workers.json'
    assert access['workers_key'] == 'client-key'


def test_a_router_without_settings_has_no_key_and_the_default_members_file():
    access = router_access('router-1', {})
    assert (access['members_file'], access['workers_key']) == ('/etc/sglang-router/workers.json', '')


@pytest.mark.parametrize('host, group, first', [
    ('gpu-a1', 'glm5_a', 'gpu-a0'),
    ('gpu-1', '', 'gpu-1'),
    ('gpu-1', 'no_such_group', 'gpu-1'),
])
def test_a_replica_meets_at_its_first_node(host, group, first):
    assert replica_first_node(host, group, GROUPS) == first


@pytest.mark.parametrize('facts, init_address, address', [
    ({'default_ipv4': {'address': '10.0.0.11'}}, '', '10.0.0.11'),
    ({'default_ipv4': {'address': '10.0.0.11'}}, '192.168.1.7', '192.168.1.7'),
    ({}, '', 'gpu-a0'),
    (None, '', 'gpu-a0'),
])
def test_the_rendezvous_address_is_set_else_the_first_node_s_own(facts, init_address, address):
    assert replica_init_address('gpu-a0', facts, init_address) == address


@pytest.mark.parametrize('host, routed, member', [
    ('gpu-a0', True, True),
    ('gpu-a1', True, False),
    ('gpu-a0', False, False),
])
def test_only_rank_0_of_a_routed_replica_is_a_router_member(host, routed, member):
    assert router_member(replica_settings(host, 'glm5_a', GROUPS, '10.0.0.11', 20000), routed) is member


@pytest.mark.parametrize('query, converge_all, fit, state', [
    ('new', False, True, 'new'),
    ('changes', False, True, 'changes'),
    ('current', False, True, 'current'),
    ('current', True, True, 'changes'),
    ('changes', False, False, 'unfit'),
    ('new', False, False, 'unfit'),
    ('current', True, False, 'unfit'),
    # A current node's inputs and GPUs are not checked: a reading left from elsewhere does not hold it back.
    ('current', False, False, 'current'),
])
def test_a_node_s_line_of_the_plan(query, converge_all, fit, state):
    assert node_plan(query, converge_all, fit) == state


def test_the_plan_summary_names_the_nodes_in_play_order():
    assert plan_summary({'gpu-2': 'changes', 'gpu-1': 'current', 'gpu-3': 'changes'}) == (
        'New (deployed all at once): none; would change (a batch at a time): gpu-2, gpu-3; current: gpu-1.')


def test_the_plan_summary_names_the_nodes_held_back():
    assert plan_summary({'gpu-1': 'new', 'gpu-2': 'unfit'}) == (
        'New (deployed all at once): gpu-1; would change (a batch at a time): none; current: none; '
        'held back, GPUs not fit to serve: gpu-2.')
