# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import (
    SglangSourceError,
    parse_argparse_source,
    read_field_defaults,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.command import (
    argv_from_topology,
    build_server_command,
    render_argv,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.endpoint import gpus_per_node, server_endpoint
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.option_checks import (
    SglangServerArgsError,
    check_tensor_parallel,
    resolve_option,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.installed_options import SourceTree

SOURCES = SourceTree(os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang', '0.5.9'), suffix='.txt')

# The command line of the seed's known-good server, structured.
SEED_ARGS = {
    'model': 'lukealonso/GLM-5-NVFP4',
    'served-model-name': 'glm-5',
    'reasoning-parser': 'glm45',
    'tool-call-parser': 'glm47',
    'trust-remote-code': True,
    'tp': 8,
    'mem-fraction-static': 0.92,
    'max-running-requests': 1024,
    'kv-cache-dtype': 'auto',
    'quantization': 'modelopt_fp4',
    'attention-backend': 'flashinfer',
    'fp8-gemm-backend': 'cutlass',
    'nsa-decode-backend': 'trtllm',
    'nsa-prefill-backend': 'trtllm',
    'moe-runner-backend': 'flashinfer_cutlass',
    'disable-cuda-graph': True,
    'disable-radix-cache': True,
    'host': '0.0.0.0',
    'port': 8000,
}
SEED_ARGV = (
    '--model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --reasoning-parser glm45 '
    '--tool-call-parser glm47 --trust-remote-code --tp-size 8 --mem-fraction-static 0.92 '
    '--max-running-requests 1024 --kv-cache-dtype auto --quantization modelopt_fp4 '
    '--attention-backend flashinfer --fp8-gemm-backend cutlass --nsa-decode-backend trtllm '
    '--nsa-prefill-backend trtllm --moe-runner-backend flashinfer_cutlass --disable-cuda-graph '
    '--disable-radix-cache --host 0.0.0.0 --port 8000'
).split()


@pytest.fixture(scope='module')
def real_source():
    return SOURCES.source('sglang.srt.server_args')


@pytest.fixture(scope='module')
def real_spec(real_source):
    return parse_argparse_source(real_source, SOURCES.source)


SYNTHETIC = '''
import argparse
from other.module import Parsers

MODE_CHOICES = ["fast", "slow"]
MORE_CHOICES = [*MODE_CHOICES, "auto"]
SET_CHOICES = {"b", "a"}


class Args:
    @staticmethod
    def add_cli_args(parser):
        level_choices = list(Parsers.Table.keys())
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--mode", type=str, choices=MORE_CHOICES)
        parser.add_argument("--pick", choices=SET_CHOICES)
        parser.add_argument("--level", choices=level_choices)
        parser.add_argument("--verbosity", type=int, choices=[0, 1, 2])
        parser.add_argument("--ratio", type=float)
        parser.add_argument("--enable-x", action="store_true")
        parser.add_argument("--old-flag", action=DeprecatedAction)
        parser.add_argument("--paths", nargs="+")
        parser.add_argument("--maybe", nargs="?")
        parser.add_argument("--dyn", choices=compute_choices())
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int)
        parser.add_argument("--token", dest="api_key")
'''
OTHER = '''
class Parsers:
    Table: dict = {"alpha": A, "beta": B}
'''


@pytest.fixture
def synthetic_spec():
    return parse_argparse_source(SYNTHETIC, lambda name: OTHER if name == 'other.module' else None)


def test_real_source_knows_every_flag_of_the_known_good_server(real_spec):
    result = build_server_command(real_spec, SEED_ARGS, gpu_count=8)
    assert result['errors'] == []
    assert result['argv'] == SEED_ARGV


@pytest.mark.parametrize('flag, expected', [
    ('--attention-backend', {'flashinfer', 'triton', 'fa3', 'trtllm_mha'}),
    ('--moe-runner-backend', {'flashinfer_cutlass', 'triton', 'auto'}),
    ('--nsa-decode-backend', {'trtllm', 'flashmla_sparse'}),
    ('--quantization', {'modelopt_fp4', 'fp8'}),
    ('--reasoning-parser', {'glm45', 'deepseek-r1'}),
    ('--tool-call-parser', {'glm47', 'qwen25'}),
    ('--sampling-backend', {'flashinfer', 'pytorch'}),
    ('--tokenizer-mode', {'auto', 'slow'}),
])
def test_real_source_choices_are_read_without_importing(real_spec, flag, expected):
    option = real_spec['options'][real_spec['option_strings'][flag]]
    assert expected <= set(option['choices'])


def test_real_source_store_true_and_aliases(real_spec):
    table = real_spec['option_strings']
    assert table['--model'] == table['--model-path']
    assert table['--tp-size'] == table['--tensor-parallel-size']
    assert real_spec['options'][table['--disable-cuda-graph']]['takes_value'] is False
    assert real_spec['options'][table['--port']]['type'] == 'int'


def test_real_source_tp_is_only_an_abbreviation(real_spec):
    canonical, spelling, note = resolve_option(real_spec, 'tp')
    assert spelling == '--tp-size'
    assert real_spec['option_strings']['--tp-size'] == canonical
    assert 'abbreviation' in note


def test_real_source_newer_flag_names_are_rejected(real_spec):
    # --dsa-*-backend replaced --nsa-*-backend only in later releases.
    result = build_server_command(real_spec, {'model-path': 'm', 'dsa-decode-backend': 'trtllm'})
    assert len(result['errors']) == 1
    assert '--dsa-decode-backend is not an option' in result['errors'][0]
    assert result['argv'] == []


def test_real_source_invalid_choice_lists_allowed_values(real_spec):
    result = build_server_command(real_spec, dict(SEED_ARGS, **{'attention-backend': 'flashinfer2'}))
    assert len(result['errors']) == 1
    message = result['errors'][0]
    assert '--attention-backend=flashinfer2 is not valid' in message
    assert 'flashinfer' in message.split('allowed:')[1]


def test_real_source_field_defaults_give_the_endpoint(real_source, real_spec):
    defaults = read_field_defaults(real_source)
    bare = build_server_command(real_spec, {'model-path': 'org/model'})
    assert server_endpoint(real_spec, bare['canonical_args'], defaults) == {
        'host': defaults['host'], 'port': defaults['port'], 'model_path': 'org/model',
        'served_model_name': 'org/model', 'tp_size': defaults['tp_size'], 'gpus_per_node': defaults['tp_size'],
        'url': 'http://127.0.0.1:30000', 'loopback': True}
    seed = build_server_command(real_spec, SEED_ARGS)
    endpoint = server_endpoint(real_spec, seed['canonical_args'], defaults)
    assert (endpoint['host'], endpoint['port'], endpoint['served_model_name'], endpoint['tp_size']) == (
        '0.0.0.0', 8000, 'glm-5', 8)
    # Bound to every interface: the node reaches it on loopback, and others can too.
    assert (endpoint['url'], endpoint['loopback']) == ('http://127.0.0.1:8000', False)
    assert endpoint['gpus_per_node'] == 8
    across = build_server_command(real_spec, {'model-path': 'org/model', 'tp-size': 16, 'nnodes': 2})
    assert server_endpoint(real_spec, across['canonical_args'], defaults)['gpus_per_node'] == 8


@pytest.mark.parametrize('tp, pp, nnodes, expected', [
    (8, None, None, 8), (4, 2, None, 8), (16, 1, 2, 8), ('8', '1', '1', 8),
    (12, 1, 5, None), ('eight', None, None, None), (0, 1, 1, None),
])
def test_gpus_per_node_counts_the_ranks_of_one_node(tp, pp, nnodes, expected):
    assert gpus_per_node(tp, pp, nnodes) == expected


def test_synthetic_choices_resolve_names_starred_sets_and_imported_class_keys(synthetic_spec):
    options = synthetic_spec['options']
    assert options['--mode']['choices'] == ['fast', 'slow', 'auto']
    assert options['--pick']['choices'] == ['a', 'b']
    assert options['--level']['choices'] == ['alpha', 'beta']
    assert options['--dyn']['choices'] is None
    assert options['--dyn']['choices_unresolved'] == 'compute_choices()'


def test_synthetic_unresolved_choices_are_reported_not_guessed(synthetic_spec):
    result = build_server_command(synthetic_spec, {'model': 'm', 'dyn': 'anything'})
    assert result['errors'] == []
    assert result['unchecked'] == ['--dyn']


@pytest.mark.parametrize('args, message', [
    ({'mode': 'warp'}, '--mode=warp is not valid; allowed: fast, slow, auto'),
    ({'verbosity': 7}, '--verbosity=7 is not valid; allowed: 0, 1, 2'),
    ({'ratio': 'lots'}, '--ratio=lots is not a valid float'),
    ({'enable-x': 'yes'}, '--enable-x is a bare flag and takes no value'),
    ({'mode': True}, '--mode needs a value'),
    ({'mode': ['fast', 'slow']}, '--mode takes one value, got a list'),
    ({'mode': 'fast', '--mode': 'slow'}, 'set the same option --mode'),
    ({'model-path': 'a'}, 'set the same option --model-path'),
    ({'m': 'x'}, '--m is ambiguous'),
    ({'tensor-parallel-size': 2, 'tp-size': 2}, 'set the same option --tp-size'),
    ({'enable_x': True}, 'did you mean --enable-x'),
    ({'token': 'hunter2'}, 'sglang_server_api_key'),
])
def test_synthetic_bad_input_is_explained(synthetic_spec, args, message):
    layered = dict({'model': 'm'}, **args)
    result = build_server_command(synthetic_spec, layered)
    assert any(message in error for error in result['errors']), result['errors']
    assert result['argv'] == []


def test_secret_values_never_appear_in_errors(synthetic_spec):
    result = build_server_command(synthetic_spec, {'model': 'm', 'token': ['hunter2']})
    assert result['errors']
    assert not any('hunter2' in error for error in result['errors'])


def test_synthetic_rendering_follows_argparse(synthetic_spec):
    args = {'model': 'm', 'paths': ['a', 'b'], 'maybe': True, 'enable-x': True, 'old-flag': False,
            'ratio': 0.5, 'verbosity': '2', 'mode': None}
    result = build_server_command(synthetic_spec, args)
    assert result['errors'] == []
    assert result['argv'] == ['--model', 'm', '--paths', 'a', 'b', '--maybe', '--enable-x',
                              '--ratio', '0.5', '--verbosity', '2']


def test_layers_recommendations_fill_only_what_inventory_leaves_unset(synthetic_spec):
    result = build_server_command(
        synthetic_spec,
        args={'model': 'm', 'mode': 'slow', 'enable-x': True},
        extra_args={'enable-x': False, 'tensor-parallel-size': 4},
        recommended_args=['--mode', 'fast', '--tp-size', '2', '--pick', 'a'],
        gpu_count=8)
    assert result['errors'] == []
    assert result['argv'] == ['--mode', 'slow', '--tensor-parallel-size', '4', '--pick', 'a', '--model', 'm']
    assert result['from_topology'] == ['--pick']


def test_tp_must_divide_into_the_gpus(synthetic_spec):
    result = build_server_command(synthetic_spec, {'model': 'm', 'tp-size': 3}, gpu_count=8)
    assert result['errors'] == ['--tp-size=3 does not divide into the 8 GPUs of this node; use one of: 1, 2, 4, 8']
    assert build_server_command(synthetic_spec, {'model': 'm', 'tp-size': 3})['errors'] == []


@pytest.mark.parametrize('tp, gpus, ok', [(8, 8, True), (4, 8, True), (16, 8, False), (3, 8, False),
                                          (0, 8, False), ('x', 8, False), (None, 8, True), (2, None, True)])
def test_check_tensor_parallel(tp, gpus, ok):
    assert (check_tensor_parallel(tp, gpus) is None) is ok


def test_render_without_spec_repeats_lists_and_drops_false():
    assert render_argv({'a': True, 'b': False, 'c': None, '--d': [1, 'x'], 'e': {'k': 1}}) == [
        '--a', '--d', '1', '--d', 'x', '--e', '{"k":1}']


def test_topology_argv_lists_become_structured():
    assert argv_from_topology(['--a', '--b', '1', '--c=2', '--d', 'x', 'y']) == {
        '--a': True, '--b': '1', '--c': '2', '--d': ['x', 'y']}
    with pytest.raises(SglangServerArgsError):
        argv_from_topology(['stray'])


def test_source_without_options_or_unparsable_is_an_error():
    with pytest.raises(SglangSourceError, match='no command line options'):
        parse_argparse_source('X = 1\n')
    with pytest.raises(SglangSourceError, match='cannot parse'):
        parse_argparse_source('def (:\n')


def _seed_with(args):
    layered = dict(SEED_ARGS)
    if 'model-path' in args:
        del layered['model']
    if 'tp-size' in args:
        del layered['tp']
    layered.update(args)
    return layered


# Input a user can type never raises: every problem is an entry in the list of errors.
@pytest.mark.parametrize('args, message', [
    ({'tp-size': 'eight'}, '--tensor-parallel-size=eight is not a valid int'),
    ({'port': 'http'}, '--port=http is not a valid int'),
    ({'port': 70000}, '--port=70000 must be a TCP port from 1 to 65535'),
    ({'port': 0}, '--port=0 must be a TCP port from 1 to 65535'),
    ({'model-path': ''}, '--model-path is required by SGLang and must not be empty'),
    ({'model-path': None}, '--model-path is required by SGLang and must not be empty'),
    ({'preferred-sampling-params': '{"temperature": 0.6'}, 'is not a valid JSON document'),
    ({'hybrid-kvcache-ratio': 0.5}, '--hybrid-kvcache-ratio is a bare flag and takes no value'),
    ({'served-model-name': 'a\nb'}, 'has a value with a line break'),
    ({'tp-size': 12, 'nnodes': 5}, 'ranks do not split evenly over --nnodes=5'),
    ({'tp-size': 16}, '--tp-size=16 does not divide into the 8 GPUs of this node'),
    ({'tp-size': 16, 'pp-size': 2, 'nnodes': 2}, 'starts 16 ranks per node'),
    ({'nnodes': 'two'}, '--nnodes=two is not a valid int'),
])
def test_real_parser_lists_bad_input_instead_of_raising(real_spec, args, message):
    result = build_server_command(real_spec, _seed_with(args), gpu_count=8)
    assert result['argv'] == []
    assert any(message in error for error in result['errors']), result['errors']


def test_missing_model_path_is_caught(real_spec):
    args = dict(SEED_ARGS)
    del args['model']
    result = build_server_command(real_spec, args, gpu_count=8)
    assert any('--model-path is required by SGLang' in error for error in result['errors'])


@pytest.mark.parametrize('args', [
    {'hybrid-kvcache-ratio': True},              # deprecated, nargs=0 inside DeprecatedAction: bare is right
    {'prefill-round-robin-balance': True},
    {'preferred-sampling-params': '{"temperature": 0.6}'},
    {'preferred-sampling-params': {'temperature': 0.6}},   # a mapping is written as JSON
    {'tp-size': 16, 'nnodes': 2},                # 8 ranks on each of two 8-GPU nodes
    {'tp-size': 8, 'pp-size': 2, 'nnodes': 2},
])
def test_real_parser_accepts_what_sglang_accepts(real_spec, args):
    result = build_server_command(real_spec, _seed_with(args), gpu_count=8)
    assert result['errors'] == []


def test_deprecated_no_value_flag_is_read_from_the_action_class(real_spec):
    option = real_spec['options']['--hybrid-kvcache-ratio']
    assert option['takes_value'] is False
    assert option['deprecated'] is True
    assert real_spec['options']['--model-path']['required'] is True
    assert real_spec['options']['--preferred-sampling-params']['type'] == 'json.loads'
    result = build_server_command(real_spec, dict(SEED_ARGS, **{'hybrid-kvcache-ratio': True}), gpu_count=8)
    assert '--hybrid-kvcache-ratio' in result['argv']
    # DeprecatedAction only warns; its help names the option that took over.
    assert 'sglang_server_args: --hybrid-kvcache-ratio is deprecated in this SGLang and does nothing; use ' \
        '--swa-full-tokens-ratio instead' in result['notes']


@pytest.mark.parametrize('layer', [['--tp', '8'], 'tp=8', 42])
def test_a_layer_that_is_not_a_mapping_is_an_error(real_spec, layer):
    result = build_server_command(real_spec, layer, gpu_count=8)
    assert any('must be a mapping' in error for error in result['errors'])


def test_bad_recommendations_are_an_error_not_a_crash(real_spec):
    result = build_server_command(real_spec, SEED_ARGS, recommended_args=['stray'], gpu_count=8)
    assert any('does not follow a flag' in error for error in result['errors'])


def test_endpoint_of_a_non_integer_port_does_not_raise(real_spec, real_source):
    endpoint = server_endpoint(real_spec, {'--port': 'http'}, read_field_defaults(real_source))
    assert endpoint['port'] is None
