# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the end of a deploy says: what runs, on what, and where it answers."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import copy

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._deploy_summary import summary

INSTALLATION = {'versions': {'sglang': '0.5.9', 'flashinfer-python': '0.6.3'}, 'venv_path': '/opt/sglang/venvs/0.5.9',
                'patches': {'sm120_allreduce_fusion': {'state': 'absent'}}}
DEPLOYMENT = {'unit_name': 'sglang', 'module': 'sglang.launch_server', 'model': 'zai-org/GLM-5-FP8', 'model_path': '',
              'url': 'http://127.0.0.1:30000', 'host': '127.0.0.1', 'port': 30000, 'api_key_required': False}
TOPOLOGY = {'gpu_count': 8, 'gpus': [{'name': 'NVIDIA RTX PRO 6000 Blackwell Server Edition', 'sm': '12.0'}],
            'weakest_link': 'SYS', 'all_pairs_p2p': False, 'allreduce_fusion_advised': False}


def lines(installation=None, deployment=None, topology=None, address=None):
    return summary(installation or INSTALLATION, deployment or DEPLOYMENT, TOPOLOGY if topology is None else topology,
                   'gpu-node', '/var/lib/inferops/history.jsonl', 'reports', address)


def test_a_deploy_on_loopback_says_what_runs_and_where():
    assert lines() == [
        'gpu-node: SGLang 0.5.9 with FlashInfer 0.6.3 in /opt/sglang/venvs/0.5.9; SM120 allreduce-fusion patch off.',
        'sglang.service runs `sglang.launch_server` serving zai-org/GLM-5-FP8; answers on the node at http://127.0.0.1:30000/v1.',
        'GPUs: 8 x NVIDIA RTX PRO 6000 Blackwell Server Edition (SM 12.0); weakest link SYS; P2P on every pair: False; '
        'allreduce fusion advised: False.',
        'History: /var/lib/inferops/history.jsonl (copy in reports/gpu-node/history.jsonl).',
    ]


@pytest.mark.parametrize('host, address, where', [
    ('0.0.0.0', '10.0.0.7', 'answers on the node at http://127.0.0.1:30000/v1 and at http://10.0.0.7:30000/v1 (API key required).'),
    ('0.0.0.0', None, 'answers on the node at http://127.0.0.1:30000/v1 (API key required).'),
    ('127.0.0.1', '10.0.0.7', 'answers on the node at http://127.0.0.1:30000/v1 (API key required).'),
])
def test_a_server_on_every_address_also_answers_on_the_node_s_own(host, address, where):
    deployment = dict(DEPLOYMENT, host=host, api_key_required=True)
    assert lines(deployment=deployment, address=address)[1].endswith(where)


def test_a_patched_node_with_a_local_model_and_an_unknown_topology():
    installation = copy.deepcopy(INSTALLATION)
    installation['patches']['sm120_allreduce_fusion']['state'] = 'present'
    deployment = dict(DEPLOYMENT, model='', model_path='/models/glm5')
    result = lines(installation, deployment, {})
    assert result[0].endswith('SM120 allreduce-fusion patch ON.')
    assert 'serving /models/glm5;' in result[1]
    assert result[2] == 'GPUs: unknown; weakest link unknown; P2P on every pair: unknown; allreduce fusion advised: unknown.'
