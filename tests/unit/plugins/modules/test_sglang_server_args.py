# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import shutil

import pytest

from ansible.module_utils.common.parameters import PASS_VARS
from ansible_collections.inferops.serving.plugins.modules import sglang_server_args
from ansible_collections.inferops.serving.tests.utils.module_result import run_in_process


@pytest.fixture
def venv(sglang_venv):
    return sglang_venv('0.5.9')


def _run(capsys, args):
    return run_in_process(sglang_server_args.main, args, capsys)


def test_valid_arguments_give_argv_and_endpoint(venv, capsys):
    result = _run(capsys, {
        'venv_path': venv,
        'args': {'model': 'lukealonso/GLM-5-NVFP4', 'served-model-name': 'glm-5', 'tp': 8,
                 'host': '0.0.0.0', 'port': 8000, 'disable-cuda-graph': True, 'reasoning-parser': 'glm45'},
        'extra_args': {'enable-flashinfer-allreduce-fusion': True},
        'recommended_args': {'disable-custom-all-reduce': True, 'port': 9999},
        'gpu_count': 8,
    })
    assert result.get('failed') is not True, result
    assert result['validated'] is True
    assert result['changed'] is False
    assert result['sglang_version'] == '0.5.9'
    assert result['argv'][:2] == ['--disable-custom-all-reduce', '--port']
    assert '--enable-flashinfer-allreduce-fusion' in result['argv']
    assert result['argv'][result['argv'].index('--port') + 1] == '8000'
    assert (result['host'], result['port'], result['served_model_name'], result['tp_size']) == (
        '0.0.0.0', 8000, 'glm-5', 8)
    assert result['from_topology'] == ['--disable-custom-all-reduce']
    assert any('--tp-size' in note for note in result['notes'])


def test_the_layers_are_merged_in_their_order(venv, capsys):
    """The role's metrics and revision under the arguments, the node's place in its replica over them all."""
    result = _run(capsys, {
        'venv_path': venv,
        'enable_metrics': True,
        'model_revision': 'abc123',
        'args': {'model': 'm', 'tp': 8, 'nnodes': 1},
        'extra_args': {'max-running-requests': 512, 'revision': False},
        'node_args': {'nnodes': 2, 'node-rank': 1, 'dist-init-addr': '10.0.0.1:5000'},
        'gpu_count': 4,
    })
    assert result.get('failed') is not True, result
    argv = result['argv']
    assert argv[0] == '--enable-metrics' and '--revision' not in argv
    assert argv[argv.index('--nnodes') + 1] == '2' and argv[argv.index('--node-rank') + 1] == '1'
    assert argv.index('--tp-size') < argv.index('--nnodes') < argv.index('--max-running-requests')
    assert result['gpus_per_node'] == 4


def test_every_error_is_listed_and_the_task_fails(venv, capsys):
    result = _run(capsys, {
        'venv_path': venv,
        'args': {'model': 'm', 'attention-backend': 'nope', 'tp-size': 3, 'api-key': 'sk-do-not-print'},
        'gpu_count': 8,
    })
    assert result['failed'] is True
    assert len(result['errors']) == 3
    assert '--attention-backend=nope is not valid; allowed:' in result['msg']
    assert 'does not divide into the 8 GPUs' in result['msg']
    assert 'sk-do-not-print' not in json.dumps(result)


def test_missing_sglang_fails_unless_allowed(tmp_path, capsys):
    result = _run(capsys, {'venv_path': str(tmp_path), 'args': {'model': 'm'}})
    assert result['failed'] is True
    assert 'SGLang is not installed' in result['msg']

    result = _run(capsys, {'venv_path': str(tmp_path), 'args': {'model': 'm', 'x': True}, 'allow_missing': True})
    assert result.get('failed') is not True
    assert result['validated'] is False
    # Merged as the other readers merge them (_server_arguments), with its names for the aliases.
    assert result['argv'] == ['--model-path', 'm', '--x']
    assert (result['port'], result['url'], result['loopback']) == (30000, 'http://127.0.0.1:30000', True)


def test_only_secret_values_are_masked(venv, capsys):
    module_args = {
        'venv_path': venv,
        'args': {'model': 'm', 'tokenizer-mode': 'auto', 'tokenizer-path': 'org/tok', 'api': 'sk-abbreviated'},
    }
    # ansible-core 2.21 returns the invocation only when the controller asks for it
    # (inject_invocation, off by default); earlier releases always return it.
    if 'inject_invocation' in PASS_VARS:
        module_args['_ansible_inject_invocation'] = True
    result = _run(capsys, module_args)
    assert result['failed'] is True
    assert 'sk-abbreviated' not in json.dumps(result)
    assert result['invocation']['module_args']['args']['tokenizer-mode'] == 'auto'
    assert result['invocation']['module_args']['args']['tokenizer-path'] == 'org/tok'


def test_a_release_with_declarative_options_is_read(sglang_venv, capsys):
    result = _run(capsys, {
        'venv_path': sglang_venv('0.5.23'),
        'args': {'model': 'lukealonso/GLM-5-NVFP4', 'served-model-name': 'glm-5', 'tp': 8, 'host': '0.0.0.0',
                 'port': 8000, 'quantization': 'modelopt_fp4', 'cuda-graph-backend-decode': 'disabled'},
        'extra_args': {'enable-flashinfer-allreduce-fusion': True},
        'gpu_count': 8,
    })
    assert result.get('failed') is not True, result
    assert (result['sglang_version'], result['options_layout'], result['option_count']) == (
        '0.5.23', 'arg_groups', 531)
    assert result['options_source'].endswith('site-packages/sglang/srt/arg_groups/fields')
    assert result['server_args_path'].endswith('site-packages/sglang/srt/server_args.py')
    assert (result['host'], result['port'], result['served_model_name'], result['tp_size']) == (
        '0.0.0.0', 8000, 'glm-5', 8)
    assert 'sglang_server_extra_args: --enable-flashinfer-allreduce-fusion is deprecated in this SGLang; use ' \
        '--flashinfer-allreduce-fusion-backend=auto instead' in result['notes']


def test_a_release_whose_options_cannot_be_read_fails_saying_so(sglang_venv, capsys):
    venv_path = sglang_venv('0.5.23')
    site = os.path.join(venv_path, 'lib', 'python3.11', 'site-packages')
    shutil.rmtree(os.path.join(site, 'sglang', 'srt', 'arg_groups'))
    os.rename(os.path.join(site, 'sglang-0.5.23.dist-info'), os.path.join(site, 'sglang-0.6.0.dist-info'))
    result = _run(capsys, {'venv_path': venv_path, 'args': {'model': 'm'}})
    assert result['failed'] is True
    assert result['msg'].startswith('cannot read the options of SGLang 0.6.0 from %s'
                                    % os.path.join(site, 'sglang', 'srt', 'server_args.py'))
    assert 'not --model-path' in result['msg']
    assert 'is not an option' not in result['msg']


def test_server_args_path_finds_the_declarations_beside_it(sglang_venv, capsys):
    venv_path = sglang_venv('0.5.23')
    path = os.path.join(venv_path, 'lib', 'python3.11', 'site-packages', 'sglang', 'srt', 'server_args.py')
    result = _run(capsys, {'server_args_path': path, 'args': {'model': 'm', 'kv-cache-dtype': 'fp8_e4m3'}})
    assert result.get('failed') is not True, result
    assert (result['options_layout'], result['server_args_path']) == ('arg_groups', path)
