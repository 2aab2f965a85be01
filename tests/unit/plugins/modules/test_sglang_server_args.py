# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import shutil

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.inferops.serving.plugins.modules import sglang_server_args

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'module_utils', 'fixtures', 'sglang', '0.5.9')
_LAYOUT = {
    'server_args.py.txt': ('sglang', 'srt', 'server_args.py'),
    'reasoning_parser.py.txt': ('sglang', 'srt', 'parser', 'reasoning_parser.py'),
    'function_call_parser.py.txt': ('sglang', 'srt', 'function_call', 'function_call_parser.py'),
}


@pytest.fixture
def venv(tmp_path):
    """A virtual environment whose site-packages holds the real SGLang 0.5.9 sources."""
    site = tmp_path / 'venv' / 'lib' / 'python3.11' / 'site-packages'
    for fixture, parts in _LAYOUT.items():
        target = site.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(FIXTURES, fixture), str(target))
    (site / 'sglang-0.5.9.dist-info').mkdir()
    return str(tmp_path / 'venv')


def _run(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            sglang_server_args.main()
    return json.loads(capsys.readouterr().out)


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
    assert result['argv'] == ['--model', 'm', '--x']


def test_only_secret_values_are_masked(venv, capsys):
    result = _run(capsys, {
        'venv_path': venv,
        'args': {'model': 'm', 'tokenizer-mode': 'auto', 'tokenizer-path': 'org/tok', 'api': 'sk-abbreviated'},
    })
    assert result['failed'] is True
    assert 'sk-abbreviated' not in json.dumps(result)
    assert result['invocation']['module_args']['args']['tokenizer-mode'] == 'auto'
    assert result['invocation']['module_args']['args']['tokenizer-path'] == 'org/tok'
