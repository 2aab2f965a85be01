# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._fleet import (
    FleetError,
    node_plan,
    plan_summary,
    replica_first_node,
    replica_init_address,
    replica_rollout,
    replica_settings,
    rollout_batches,
    router_access,
    router_member,
)
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_workers import (
    SglangRouterWorkersError,
    requests_in_flight,
    worker_url,
)


def sglang_requests_in_flight(metrics_text):
    try:
        return requests_in_flight(metrics_text)
    except SglangRouterWorkersError as exc:
        raise AnsibleFilterError(str(exc))


def router_worker_url(address, port):
    return worker_url(address, port)


def fleet_replica(host, replica_group, groups, init_address, init_port, hostvars=None):
    if not init_address and hostvars is not None:
        first = replica_first_node(host, replica_group, groups)
        init_address = replica_init_address(first, hostvars[first].get('ansible_facts'))
    try:
        return replica_settings(host, replica_group, groups, init_address, init_port)
    except FleetError as exc:
        raise AnsibleFilterError(str(exc))


def fleet_router_member(replica, routed):
    return router_member(replica, routed)


def fleet_router(router_host, hostvars, router_url='', router_api_key=''):
    return router_access(router_host, hostvars[router_host] if router_host else {}, router_url, router_api_key)


def fleet_batches(hosts, hostvars, replicas_per_batch=1):
    replica_of = {}
    for host in hosts or []:
        replica_of[host] = hostvars[host].get('serving_replica_group') or ''
    try:
        return rollout_batches(list(hosts or []), replica_of, replicas_per_batch)
    except FleetError as exc:
        raise AnsibleFilterError(str(exc))


def fleet_replica_rollout(nodes, plan):
    if not isinstance(plan, dict):
        raise AnsibleFilterError('fleet_replica_rollout: the plan must be a mapping of node to state, got %s'
                                 % type(plan).__name__)
    return replica_rollout(list(nodes or []), plan)


def fleet_node_plan(query_plan, converge_all=False, gpus_fit=True):
    return node_plan(query_plan, converge_all, gpus_fit)


def fleet_plan_summary(plan):
    if not isinstance(plan, dict):
        raise AnsibleFilterError('fleet_plan_summary: the plan must be a mapping of node to state, got %s'
                                 % type(plan).__name__)
    return plan_summary(plan)


class FilterModule(object):
    def filters(self):
        return {
            'sglang_requests_in_flight': sglang_requests_in_flight,
            'router_worker_url': router_worker_url,
            'fleet_replica': fleet_replica,
            'fleet_router': fleet_router,
            'fleet_router_member': fleet_router_member,
            'fleet_batches': fleet_batches,
            'fleet_replica_rollout': fleet_replica_rollout,
            'fleet_node_plan': fleet_node_plan,
            'fleet_plan_summary': fleet_plan_summary,
        }
