# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import SglangSourceError
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.command import build_server_command
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.endpoint import server_endpoint
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.installed_options import (
    SourceTree,
    options_layout,
    read_server_options,
    sglang_version,
)

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang')

# A GLM-5 NVFP4 server on one node of eight GPUs, as each release spells it.
GLM5_ARGS = {
    'model-path': 'lukealonso/GLM-5-NVFP4',
    'served-model-name': 'glm-5',
    'tp-size': 8,
    'quantization': 'modelopt_fp4',
    'kv-cache-dtype': 'fp8_e4m3',
    'mem-fraction-static': 0.92,
    'max-running-requests': 1024,
    'reasoning-parser': 'glm45',
    'tool-call-parser': 'glm47',
    'trust-remote-code': True,
    'attention-backend': 'flashinfer',
    'moe-runner-backend': 'flashinfer_cutlass',
    'fp8-gemm-backend': 'cutlass',
    'disable-radix-cache': True,
    'host': '0.0.0.0',
    'port': 8000,
}
GLM5_RELEASE_ARGS = {
    '0.5.9': {'nsa-decode-backend': 'trtllm', 'nsa-prefill-backend': 'trtllm', 'disable-cuda-graph': True},
    '0.5.23': {'dsa-decode-backend': 'trtllm', 'dsa-prefill-backend': 'trtllm',
               'cuda-graph-backend-decode': 'disabled', 'cuda-graph-backend-prefill': 'disabled',
               'flashinfer-allreduce-fusion-backend': 'auto'},
}
GLM5_ARGV = (
    '--model-path lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --tp-size 8 --quantization modelopt_fp4 '
    '--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.92 --max-running-requests 1024 --reasoning-parser glm45 '
    '--tool-call-parser glm47 --trust-remote-code --attention-backend flashinfer '
    '--moe-runner-backend flashinfer_cutlass --fp8-gemm-backend cutlass --disable-radix-cache '
    '--host 0.0.0.0 --port 8000'
).split()
GLM5_RELEASE_ARGV = {
    '0.5.9': '--nsa-decode-backend trtllm --nsa-prefill-backend trtllm --disable-cuda-graph'.split(),
    '0.5.23': ('--dsa-decode-backend trtllm --dsa-prefill-backend trtllm --cuda-graph-backend-decode disabled '
               '--cuda-graph-backend-prefill disabled --flashinfer-allreduce-fusion-backend auto').split(),
}


def _sources(version):
    return SourceTree(os.path.join(FIXTURES, version), suffix='.txt')


@pytest.fixture(scope='module', params=['0.5.9', '0.5.23'])
def release(request):
    return request.param, read_server_options(_sources(request.param), request.param)


@pytest.mark.parametrize('version, layout, option_count', [
    ('0.5.9', 'argparse', 331),
    ('0.5.23', 'arg_groups', 531),
])
def test_each_release_is_read_the_way_it_declares_its_options(version, layout, option_count):
    sources = _sources(version)
    assert options_layout(sources) == layout
    options = read_server_options(sources, version)
    assert (options['layout'], len(options['spec']['options'])) == (layout, option_count)
    expected = os.path.join('sglang', 'srt', 'arg_groups', 'fields') if layout == 'arg_groups' else os.path.join(
        'sglang', 'srt', 'server_args.py.txt')
    assert options['source'].endswith(expected)


def test_a_glm5_server_command_is_valid_for_both_releases(release):
    version, options = release
    spec = options['spec']
    args = dict(GLM5_ARGS, **GLM5_RELEASE_ARGS[version])
    result = build_server_command(spec, args, gpu_count=8)
    assert result['errors'] == []
    assert result['argv'] == GLM5_ARGV + GLM5_RELEASE_ARGV[version]
    assert result['unchecked'] == []
    endpoint = server_endpoint(spec, result['canonical_args'], options['defaults'])
    assert endpoint == {'host': '0.0.0.0', 'port': 8000, 'model_path': 'lukealonso/GLM-5-NVFP4',
                        'served_model_name': 'glm-5', 'tp_size': 8, 'gpus_per_node': 8, 'url': 'http://127.0.0.1:8000',
                        'loopback': False}


def test_the_defaults_give_the_endpoint_when_nothing_is_set(release):
    version, options = release
    result = build_server_command(options['spec'], {'model': 'org/model'})
    assert result['errors'] == []
    assert server_endpoint(options['spec'], result['canonical_args'], options['defaults']) == {
        'host': '127.0.0.1', 'port': 30000, 'model_path': 'org/model', 'served_model_name': 'org/model',
        'tp_size': 1, 'gpus_per_node': 1, 'url': 'http://127.0.0.1:30000', 'loopback': True}


@pytest.mark.parametrize('version, other, refused', [
    ('0.5.9', '0.5.23', ['--dsa-decode-backend', '--dsa-prefill-backend', '--cuda-graph-backend-decode',
                         '--cuda-graph-backend-prefill', '--flashinfer-allreduce-fusion-backend']),
    # --disable-cuda-graph is still there in 0.5.23, deprecated.
    ('0.5.23', '0.5.9', ['--nsa-decode-backend', '--nsa-prefill-backend']),
])
def test_the_other_releases_spellings_are_named(version, other, refused):
    spec = read_server_options(_sources(version), version)['spec']
    result = build_server_command(spec, dict(GLM5_ARGS, **GLM5_RELEASE_ARGS[other]), gpu_count=8)
    assert [error.split()[1] for error in result['errors']] == refused
    assert all('is not an option of this SGLang' in error for error in result['errors'])


def test_sglang_version_comes_from_the_dist_info(tmp_path):
    assert sglang_version(str(tmp_path)) is None
    (tmp_path / 'sglang-0.5.23.dist-info').mkdir()
    assert sglang_version(str(tmp_path)) == '0.5.23'


def _site(tmp_path, files):
    for name, text in files.items():
        path = tmp_path.joinpath(*name.split('/'))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return SourceTree(str(tmp_path))


def test_neither_layout_is_an_error_naming_both(tmp_path):
    sources = _site(tmp_path, {'sglang/__init__.py': ''})
    with pytest.raises(SglangSourceError) as raised:
        read_server_options(sources, '0.6.0')
    assert str(raised.value) == (
        'cannot read the options of SGLang 0.6.0 from %s: neither sglang/srt/arg_groups/fields/ nor '
        'sglang/srt/server_args.py is there' % tmp_path)


def test_a_parser_without_the_servers_options_is_not_taken_for_one(tmp_path):
    # 0.5.23's server_args.py without its declarations: its nine add_argument calls are not the server.
    sources = _site(tmp_path, {'sglang/srt/server_args.py': _sources('0.5.23').source('sglang.srt.server_args')})
    with pytest.raises(SglangSourceError) as raised:
        read_server_options(sources)
    message = str(raised.value)
    assert message.startswith('cannot read the options of SGLang (unknown version) from %s'
                              % tmp_path.joinpath('sglang', 'srt', 'server_args.py'))
    assert '9 options were found but not --model-path' in message


@pytest.mark.parametrize('fields, reason', [
    ({'sglang/srt/arg_groups/fields/core.py': 'class Core:\n    _NS_PATH = "core"\n'},
     'no field of the arg_groups declarations is a command line option'),
    ({'sglang/srt/arg_groups/fields/core.py': 'class Core(:\n'}, 'cannot parse sglang.srt.arg_groups.fields.core'),
    ({}, 'no field of the arg_groups declarations is a command line option'),
])
def test_declarations_that_yield_no_options_are_an_error(tmp_path, fields, reason):
    files = {'sglang/srt/server_args.py': 'class ServerArgs:\n    pass\n'}
    files.update(fields)
    sources = _site(tmp_path, files)
    os.makedirs(sources.package_path('sglang.srt.arg_groups.fields'), exist_ok=True)
    with pytest.raises(SglangSourceError) as raised:
        read_server_options(sources, '0.6.0')
    assert str(raised.value).startswith('cannot read the options of SGLang 0.6.0 from %s: '
                                        % tmp_path.joinpath('sglang', 'srt', 'arg_groups', 'fields'))
    assert reason in str(raised.value)


def test_missing_server_args_in_the_declarative_layout_is_an_error(tmp_path):
    sources = _site(tmp_path, {'sglang/srt/arg_groups/fields/core.py': ''})
    with pytest.raises(SglangSourceError, match='sglang/srt/server_args.py, which builds the parser, is missing'):
        read_server_options(sources, '0.6.0')
