# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import copy

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._deployment import (
    DeploymentError,
    fingerprint,
    patch_state,
    record,
    tensor_parallel_size,
)
from ansible_collections.inferops.serving.plugins.module_utils._history import (
    is_repeat,
    make_record,
    recent_benchmark,
)

# What the sglang and sglang_server roles publish on the lab node (sglang_installation,
# sglang_server_deployment), reduced to the keys the fingerprint reads.
STACK = {
    'versions': {'sglang': '0.5.9', 'flashinfer-python': '0.6.3', 'flashinfer-cubin': '0.6.3',
                 'sgl-kernel': '0.3.21', 'torch': '2.9.1'},
    'packages': ['sglang', 'flashinfer-python'],
    'patches': {'sm120_allreduce_fusion': {'state': 'absent', 'files': {
        'sglang/srt/server_args.py': 'pristine', 'flashinfer/jit/comm.py': 'pristine'}}},
}
SERVER = {
    'model_path': 'lukealonso/GLM-5-NVFP4', 'revision': None, 'module': 'sglang.launch_server',
    'args': {'model-path': 'lukealonso/GLM-5-NVFP4', 'tp-size': 8},
    'unit_checksum': '2b1f0c5f2e0a8c1e4b1c7f0d9a1e3b5c7d9f1a3b',
    'env_checksum': '9f8e7d6c5b4a39281706f5e4d3c2b1a098765432',
}


def changed(base, path, value):
    result = copy.deepcopy(base)
    target = result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return result


@pytest.mark.parametrize('stack, server', [
    (changed(STACK, ('versions', 'torch'), '2.9.2'), SERVER),
    (changed(STACK, ('versions', 'sgl-kernel'), '0.3.22'), SERVER),
    (changed(STACK, ('versions', 'flashinfer-cubin'), '0.6.4'), SERVER),
    (changed(STACK, ('patches', 'sm120_allreduce_fusion', 'files', 'flashinfer/jit/comm.py'), 'patched'), SERVER),
    (STACK, changed(SERVER, ('model_path',), 'zai-org/GLM-5')),
    (STACK, changed(SERVER, ('revision',), 'a1b2c3d')),
    (STACK, changed(SERVER, ('unit_checksum',), '0' * 40)),
    (STACK, changed(SERVER, ('env_checksum',), '1' * 40)),
    (STACK, changed(SERVER, ('args', 'tp-size'), 4)),
], ids=['torch', 'sgl-kernel', 'flashinfer-cubin', 'patch-on-disk', 'model', 'revision', 'unit', 'env-file', 'args'])
def test_everything_a_deployment_runs_with_changes_the_fingerprint(stack, server):
    assert fingerprint(stack, server) != fingerprint(STACK, SERVER)


def test_the_fingerprint_is_stable_across_key_order():
    reordered = dict(reversed(list(STACK.items())))
    assert fingerprint(reordered, SERVER) == fingerprint(STACK, SERVER)


def test_a_torch_pin_change_records_a_new_deploy_and_needs_a_fresh_baseline():
    now = 1_800_000_000.0
    old = fingerprint(STACK, SERVER)
    history = [
        make_record('deploy', 'gpu-node', {'fingerprint': old}, now - 600),
        make_record('benchmark', 'gpu-node', {'fingerprint': old, 'metrics': {'output_throughput': 1867.0}}, now - 500),
    ]
    # Same configuration: no new deploy record, and experiment.yml reuses the recent baseline.
    assert is_repeat(history, make_record('deploy', 'gpu-node', {'fingerprint': old}, now))
    assert recent_benchmark(history, old, 86400, now) is not None
    # torch 2.9.1 -> 2.9.2 and nothing else: a new deploy, and no baseline measured before it counts.
    new = fingerprint(changed(STACK, ('versions', 'torch'), '2.9.2'), SERVER)
    assert not is_repeat(history, make_record('deploy', 'gpu-node', {'fingerprint': new}, now))
    assert recent_benchmark(history, new, 86400, now) is None


def test_missing_published_keys_are_named():
    with pytest.raises(DeploymentError, match='server.unit_checksum'):
        fingerprint(STACK, {'env_checksum': 'x', 'model_path': 'm'})


@pytest.mark.parametrize('layers, size', [
    (({'tp-size': 8},), 8),
    (({'tp': '4'},), 4),
    (({'--tensor-parallel-size': 2},), 2),
    (({'tp_size': 8}, {'tp': 4}), 4),            # extra arguments win, whatever the spelling
    (({'tp-size': 8}, {'tp-size': False}), None),  # false removes the flag: the GPUs decide
    (({'model-path': 'x'}, {}), None),
    ((None, None), None),
])
def test_the_tensor_parallel_size_of_the_server_arguments(layers, size):
    assert tensor_parallel_size(*layers) == size


@pytest.mark.parametrize('layer', [{'tp': 'eight'}, {'tp-size': True}])
def test_a_tensor_parallel_size_that_is_no_number_is_refused(layer):
    with pytest.raises(DeploymentError, match='--tp'):
        tensor_parallel_size(layer)


def test_patch_state_after_the_run_comes_from_what_the_module_proved():
    result = {'files': [
        {'path': 'flashinfer/jit/comm.py', 'status': 'pristine', 'action': 'patch'},
        {'path': 'sglang/srt/server_args.py', 'status': 'patched', 'action': 'restore'},
        {'path': 'sglang/srt/layers/communicator.py', 'status': 'pristine', 'action': 'none'},
    ]}
    assert patch_state(result) == {'flashinfer/jit/comm.py': 'patched', 'sglang/srt/server_args.py': 'pristine',
                                   'sglang/srt/layers/communicator.py': 'pristine'}
    assert patch_state({'skipped': True}) == {}


def test_a_deploy_record_holds_the_fingerprint_where_the_server_answers_and_what_it_runs_from():
    stack = dict(STACK, release_set={'name': '0.5.9'}, venv_path='/opt/sglang/venvs/0.5.9-1a2b3c4d')
    server = dict(SERVER, url='http://127.0.0.1:30000', model='glm-5', ready_path='/health', from_topology=['tp-size'],
                  environment={'NCCL_P2P_DISABLE': '1'}, python='/opt/sglang/venvs/0.5.9-1a2b3c4d/bin/python')
    written = record(stack, server, 'nccl_min_nchannels_16')
    assert written['fingerprint'] == fingerprint(stack, server)
    assert written['experiment'] == 'nccl_min_nchannels_16'
    assert written['server'] == {
        'url': 'http://127.0.0.1:30000', 'model': 'glm-5', 'model_path': 'lukealonso/GLM-5-NVFP4', 'revision': None,
        'module': 'sglang.launch_server', 'ready_path': '/health', 'args': SERVER['args'], 'from_topology': ['tp-size'],
        'env': {'NCCL_P2P_DISABLE': '1'}, 'python': '/opt/sglang/venvs/0.5.9-1a2b3c4d/bin/python'}
    assert (written['release_set'], written['venv'], written['versions']) == ('0.5.9', stack['venv_path'], STACK['versions'])
    assert written['patches'] == STACK['patches'] and written['sm120_allreduce_fusion_patch'] is False
    assert record(changed(stack, ('patches', 'sm120_allreduce_fusion', 'state'), 'present'), server)['sm120_allreduce_fusion_patch']
    assert record(stack, server)['experiment'] is None


def test_a_deploy_record_of_facts_without_the_server_address_names_what_they_lack():
    with pytest.raises(DeploymentError, match="lack 'url'"):
        record(dict(STACK, release_set={'name': '0.5.9'}, venv_path='/v'), SERVER)
