# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Replicas and rollout batches of a fleet.

A replica is what the router sees as one worker: one node, or the nodes of an inventory group
that serve one model together (SGLang's --nnodes). Its nodes restart in the same batch; rank 0
is the first node of its group, and the only one registered with the router.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type


class FleetError(Exception):
    """Inventory settings that do not describe replicas."""


def replica_settings(host, replica_group, groups, init_address, init_port):
    """Rank, node count and the arguments SGLang needs for one node of a replica.

    ``replica_group`` is the inventory group of the node's replica ('' for a node on its own);
    ``groups`` the inventory's groups; ``init_address`` the address of the group's first node.
    """
    if not replica_group:
        return {'rank': 0, 'nnodes': 1, 'nodes': [host], 'args': {}}
    if replica_group not in groups:
        raise FleetError('serving_replica_group %r of %s is not an inventory group' % (replica_group, host))
    nodes = list(groups[replica_group])
    if host not in nodes:
        raise FleetError('%s sets serving_replica_group %r but is not in that group (its nodes: %s)'
                         % (host, replica_group, ', '.join(nodes)))
    if len(nodes) < 2:
        raise FleetError('replica group %r has one node (%s): a replica across nodes needs two or more; '
                         'leave serving_replica_group empty for a node on its own' % (replica_group, nodes[0]))
    try:
        port = int(init_port)
    except (TypeError, ValueError):
        raise FleetError('serving_replica_init_port must be a port number, got %r' % (init_port,))
    address = str(init_address)
    if ':' in address and not address.startswith('['):
        address = '[%s]' % address
    return {
        'rank': nodes.index(host),
        'nnodes': len(nodes),
        'nodes': nodes,
        'args': {'nnodes': len(nodes), 'node-rank': nodes.index(host), 'dist-init-addr': '%s:%d' % (address, port)},
    }


# Where a router that no deploy of this run published listens, and where its host records the
# workers it should have (role sglang_router's defaults).
ROUTER_DEFAULT_URL = 'http://127.0.0.1:30000'
ROUTER_DEFAULT_CONFIG_DIR = '/etc/sglang-router'


def router_access(router_host, router_vars, router_url='', router_api_key=''):
    """How the serving role reaches the router in front of the fleet.

    ``router_host`` is the router group's first host ('' without a router); ``router_vars`` its
    host variables. The URL and key set on the serving side win; else what role
    sglang_router published on its host (``sglang_router_deployment``), else its settings: smg's
    admin key when the router has one, else its client key. A run that does not deploy the router
    (an experiment) finds the members file under the router's config dir.
    """
    if not router_host:
        return {'url': '', 'members_file': '', 'workers_key': ''}
    router_vars = router_vars or {}
    deployment = router_vars.get('sglang_router_deployment') or {}
    config_dir = router_vars.get('sglang_router_config_dir', ROUTER_DEFAULT_CONFIG_DIR)
    return {
        'url': router_url or deployment.get('url', ROUTER_DEFAULT_URL),
        'members_file': deployment.get('members_file', '%s/workers.json' % config_dir),
        'workers_key': (router_api_key or router_vars.get('sglang_router_admin_api_key', '')
                        or router_vars.get('sglang_router_api_key', '')),
    }


def replica_first_node(host, replica_group, groups):
    """The node a replica's ranks meet at: its group's first node (the node itself on its own)."""
    if not replica_group:
        return host
    return (list(groups.get(replica_group) or []) or [host])[0]


def replica_init_address(first_node, first_node_facts, init_address=''):
    """The rendezvous address: ``init_address`` when set, else the first node's default IPv4
    address from its facts, else its inventory name."""
    if init_address:
        return init_address
    return ((first_node_facts or {}).get('default_ipv4') or {}).get('address', first_node)


def router_member(replica, routed):
    """Only rank 0 of a replica serves HTTP for it, and only it is registered with the router."""
    return bool(routed) and int(replica['rank']) == 0


def rollout_batches(hosts, replica_of, replicas_per_batch=1):
    """Order the changing hosts so that each batch holds whole replicas.

    ``replica_of`` maps a host to its replica group ('' or missing: on its own). Returns
    ``{'hosts': [...], 'sizes': [...]}`` for a play's host list and its ``serial`` list.
    """
    try:
        per_batch = int(replicas_per_batch)
    except (TypeError, ValueError):
        raise FleetError('serving_deploy_serial must be a whole number, got %r' % (replicas_per_batch,))
    if per_batch < 1:
        raise FleetError('serving_deploy_serial must be 1 or more, got %d' % per_batch)
    replicas = []
    members = {}
    for host in hosts:
        key = replica_of.get(host) or ('host:' + host)
        if key not in members:
            members[key] = []
            replicas.append(key)
        members[key].append(host)
    ordered = []
    sizes = []
    for start in range(0, len(replicas), per_batch):
        batch = [h for key in replicas[start:start + per_batch] for h in members[key]]
        ordered.extend(batch)
        sizes.append(len(batch))
    return {'hosts': ordered, 'sizes': sizes or [1]}


# What the deploy plan says of one node (deploy_state, the serving role's plan).
NODE_NEW = 'new'            # never deployed by this collection: serves nothing yet
NODE_CHANGES = 'changes'    # deployed, and a deploy would restart its server
NODE_CURRENT = 'current'    # deployed, and a deploy would change nothing on its server
NODE_UNFIT = 'unfit'        # would change, but its GPUs are not fit to serve: held back, out of the router
NODE_STATES = (NODE_NEW, NODE_CHANGES, NODE_CURRENT, NODE_UNFIT)


def node_plan_state(deployed_before, would_restart):
    """One node's line of the plan."""
    if not deployed_before:
        return NODE_NEW
    return NODE_CHANGES if would_restart else NODE_CURRENT


def replica_rollout(nodes, plan):
    """Which path the replica of ``nodes`` takes in a deploy: 'new', 'changes' or 'current'.

    Its nodes restart together, so the replica changes when any node does. A replica whose
    nodes are all new serves nothing yet and can be deployed with the other new ones at once,
    without a drain. A node the plan has no answer for (its check did not run) is taken as
    changing: the careful, drained path. A replica with a node whose GPUs are not fit to serve
    is held back whole: its nodes restart together, and one cannot serve.
    """
    states = [plan.get(node) for node in nodes]
    if NODE_UNFIT in states:
        return NODE_UNFIT
    if any(state not in NODE_STATES for state in states):
        return NODE_CHANGES
    if states and all(state == NODE_NEW for state in states):
        return NODE_NEW
    if any(state != NODE_CURRENT for state in states):
        return NODE_CHANGES
    return NODE_CURRENT


def node_plan(query_plan, converge_all=False, gpus_fit=True):
    """One node's line of the deploy plan from deploy_state's answer (``new``, ``changes`` or
    ``current``): a current node changes all the same when every node converges again
    (serving_fleet_converge_all), and a node whose inputs were checked (one that changes) but whose
    GPUs are not fit to serve is held back (``unfit``); ``gpus_fit`` is read only for such a node."""
    checked = query_plan != NODE_CURRENT or bool(converge_all)
    if checked and not gpus_fit:
        return NODE_UNFIT
    if converge_all and query_plan == NODE_CURRENT:
        return NODE_CHANGES
    return query_plan


def plan_summary(plan):
    """What the deploy plan says of the fleet, node by node in play order."""
    def nodes(state):
        return ', '.join(node for node, node_state in plan.items() if node_state == state)

    unfit = nodes(NODE_UNFIT)
    return ('New (deployed all at once): %s; would change (a batch at a time): %s; current: %s%s.'
            % (nodes(NODE_NEW) or 'none', nodes(NODE_CHANGES) or 'none', nodes(NODE_CURRENT) or 'none',
               '; held back, GPUs not fit to serve: %s' % unfit if unfit else ''))
