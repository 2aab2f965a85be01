# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an operator reads at the end of a deploy: what runs, on what, and where it answers."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

# A server bound to every address answers on the node's own address too.
ANY_ADDRESS = ('0.0.0.0', '::')


def summary(installation, deployment, topology, node, history_path, reports_dir, address=None):
    """Four lines from what the roles published: ``installation`` (sglang_installation),
    ``deployment`` (sglang_server_deployment), ``topology`` (the nccl_topology fact, possibly
    empty) and ``address``, the node's default IPv4 address when known."""
    versions = installation['versions']
    patch = installation['patches']['sm120_allreduce_fusion']['state']
    elsewhere = (' and at http://%s:%s/v1' % (address, deployment['port'])
                 if deployment['host'] in ANY_ADDRESS and address is not None else '')
    gpus = topology.get('gpus') or []
    first = gpus[0] if gpus else {}
    model = (' x %s (SM %s)' % (first['name'], first.get('sm', '?'))) if first.get('name') else ''
    return [
        '%s: SGLang %s with FlashInfer %s in %s; SM120 allreduce-fusion patch %s.'
        % (node, versions['sglang'], versions['flashinfer-python'], installation['venv_path'],
           'ON' if patch == 'present' else 'off'),
        '%s.service runs `%s` serving %s; answers on the node at %s/v1%s%s.'
        % (deployment['unit_name'], deployment['module'], deployment['model'] or deployment['model_path'] or 'the model',
           deployment['url'], elsewhere, ' (API key required)' if deployment['api_key_required'] else ''),
        'GPUs: %s%s; weakest link %s; P2P on every pair: %s; allreduce fusion advised: %s.'
        % (topology.get('gpu_count', 'unknown'), model, topology.get('weakest_link', 'unknown'),
           topology.get('all_pairs_p2p', 'unknown'), topology.get('allreduce_fusion_advised', 'unknown')),
        'History: %s (copy in %s/%s/history.jsonl).' % (history_path, reports_dir, node),
    ]
