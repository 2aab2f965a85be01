# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import textwrap

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.arg_groups_reader import (
    parse_arg_groups,
    read_arg_group_defaults,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import SglangSourceError
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.command import build_server_command
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.option_checks import SglangServerArgsError, resolve_option
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.installed_options import SourceTree

SOURCES = SourceTree(os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang', '0.5.23'), suffix='.txt')


@pytest.fixture(scope='module')
def spec():
    return parse_arg_groups(SOURCES)


def _option(spec, flag):
    return spec['options'][spec['option_strings'][flag]]


def _errors(spec, args):
    return build_server_command(spec, dict({'model-path': 'org/model'}, **args))['errors']


def test_every_option_of_the_release_is_read(spec):
    # argparse built from SGLang's own arg_utils and the same files has 531 options: 522
    # fields and 9 registered by hand in ServerArgs.add_cli_args.
    assert len(spec['options']) == 531
    assert _option(spec, '--model-path')['required'] is True


@pytest.mark.parametrize('flag, canonical', [
    ('--model', '--model-path'),
    ('--tensor-parallel-size', '--tp-size'),
    ('--ep', '--ep-size'),
    ('--expert-parallel-size', '--ep-size'),
    ('--nccl-init-addr', '--dist-init-addr'),
    ('--context-bucket', '--cuda-graph-prefill-max-context'),
    ('--no-enable-tf32-matmul', '--enable-tf32-matmul'),
])
def test_aliases(spec, flag, canonical):
    assert spec['option_strings'][flag] == canonical


def test_cli_name_keeps_the_field_as_dest(spec):
    option = _option(spec, '--fp8-gemm-backend')
    assert option['dest'] == 'fp8_gemm_runner_backend'
    assert '--fp8-gemm-runner-backend' not in spec['option_strings']


@pytest.mark.parametrize('key, spelling', [
    ('tp', '--tp-size'),
    ('mem-frac', '--mem-fraction-static'),
    ('served', '--served-model-name'),
    ('disable-radix', '--disable-radix-cache'),
])
def test_unique_prefixes_are_abbreviations(spec, key, spelling):
    canonical, written, note = resolve_option(spec, key)
    assert written == spelling
    assert 'abbreviation' in note


@pytest.mark.parametrize('key, candidates', [
    ('cuda-graph-backend', '--cuda-graph-backend-decode, --cuda-graph-backend-prefill'),
    ('no-enable', '--no-enable-tf32-matmul'),    # the --no- spellings count too
])
def test_ambiguous_prefixes_are_refused(spec, key, candidates):
    with pytest.raises(SglangServerArgsError, match='is ambiguous; it could be .*%s' % candidates):
        resolve_option(spec, key)


def test_an_exact_name_wins_over_longer_ones(spec):
    assert '--disable-cuda-graph-padding' in spec['option_strings']
    assert resolve_option(spec, 'disable-cuda-graph') == ('--disable-cuda-graph', '--disable-cuda-graph', None)


@pytest.mark.parametrize('flag, option_type, nargs', [
    ('--port', 'int', None),
    ('--mem-fraction-static', 'float', None),           # Optional[float]
    ('--served-model-name', 'str', None),               # Optional[str]
    ('--context-length', 'human_readable_int', None),   # Optional[int] read by a type_parser
    ('--preferred-sampling-params', 'json.loads', None),
    ('--cuda-graph-bs-decode', 'int', '+'),             # Optional[List[int]]
    ('--custom-weight-loader', 'str', '*'),             # List with Arg(nargs="*")
    ('--remote-instance-weight-loader-send-weights-group-ports', 'json_list_type', None),
    ('--lora-paths', 'str', '*'),                       # custom action with action_kwargs
    ('--model-checksum', 'str', '?'),
])
def test_types_and_nargs(spec, flag, option_type, nargs):
    option = _option(spec, flag)
    assert (option['type'], option['nargs'], option['takes_value']) == (option_type, nargs, True)


@pytest.mark.parametrize('flag, expected', [
    ('--quantization', {'modelopt_fp4', 'fp8', 'awq'}),           # a list in choices.py
    ('--kv-cache-dtype', {'auto', 'fp8_e4m3', 'nvfp4'}),          # inline
    ('--startup-weight-load-mode', {'serial', 'overlap'}),        # Literal[...]
    ('--flashinfer-allreduce-fusion-backend', {'auto', 'mnnvl'}),  # Optional[Literal[...]]
    ('--cuda-graph-backend-decode', {'full', 'breakable', 'disabled'}),  # Backend.ALL, another module
    ('--cp-strategy', {'zigzag', 'interleave'}),                  # a tuple
    ('--sampling-backend', {'flashinfer', 'pytorch'}),            # set(frozenset(...)) by hand
    ('--reasoning-parser', {'auto', 'glm45', 'deepseek-r1'}),     # "auto" + a helper's list
    ('--tool-call-parser', {'auto', 'glm47', 'qwen'}),
    ('--speculative-moe-runner-backend', {'flashinfer_cutlass'}),
])
def test_choices_are_read_where_they_are_defined(spec, flag, expected):
    assert expected <= set(_option(spec, flag)['choices'])


def test_retired_cuda_graph_backend_is_not_a_choice(spec):
    assert 'tc_piecewise' not in _option(spec, '--cuda-graph-backend-decode')['choices']
    errors = _errors(spec, {'cuda-graph-backend-decode': 'tc_piecewise'})
    assert errors == ['sglang_server_args: --cuda-graph-backend-decode=tc_piecewise is not valid; '
                      'allowed: full, breakable, disabled']


def test_choices_that_need_running_code_are_reported(spec):
    assert _option(spec, '--kv-canary-real-data')['choices_unresolved'] == (
        '[m.name.lower() for m in _real_kv_hash_modes()]')
    # Its list lives in sglang/srt/utils/common.py, which the fixtures leave out.
    result = build_server_command(spec, {'model-path': 'm', 'lora-target-modules': ['q_proj']})
    assert result['errors'] == [] and result['unchecked'] == ['--lora-target-modules']


@pytest.mark.parametrize('flag, action', [
    ('--trust-remote-code', 'store_true'),            # bool
    ('--enable-quant-communications', 'store_true'),  # Optional[bool]
    ('--enable-tf32-matmul', 'BooleanOptionalAction'),
    ('--no-enable-tf32-matmul', 'BooleanOptionalAction'),
    ('--disable-cuda-graph', 'DeprecatedStoreTrueAction'),
])
def test_bare_flags(spec, flag, action):
    option = _option(spec, flag)
    assert (option['action'], option['takes_value']) == (action, False)
    assert _errors(spec, {flag: True}) == []
    assert 'is a bare flag and takes no value' in _errors(spec, {flag: 'yes'})[0]


@pytest.mark.parametrize('args, note', [
    ({'disable-cuda-graph': True},
     '--disable-cuda-graph is deprecated in this SGLang; use --cuda-graph-backend-{decode,prefill}=disabled instead'),
    ({'enable-flashinfer-allreduce-fusion': True},
     '--enable-flashinfer-allreduce-fusion is deprecated in this SGLang; use '
     '--flashinfer-allreduce-fusion-backend=auto instead'),
    ({'monokernel-backend': 'amd'},
     '--monokernel-backend is deprecated in this SGLang; use --enable-amd-monokernel instead'),
    ({'enable-dp-attention': True, 'dp-size': 2},
     '--enable-dp-attention is deprecated in this SGLang; use --attn-dp-size <dp-size> instead'),
    ({'grpc-mode': True}, '--grpc-mode is deprecated in this SGLang; use --smg-grpc-mode instead'),
])
def test_deprecated_options_are_accepted_with_a_note(spec, args, note):
    result = build_server_command(spec, dict({'model-path': 'm'}, **args))
    assert result['errors'] == []
    assert 'sglang_server_args: %s' % note in result['notes']


def test_replacements_of_deprecated_options_are_plain_options(spec):
    result = build_server_command(spec, {'model-path': 'm', 'flashinfer-allreduce-fusion-backend': 'auto',
                                         'enforce-disable-flashinfer-allreduce-fusion': True})
    assert (result['errors'], result['notes']) == ([], [])
    assert 'nvfp4' in _errors(spec, {'monokernel-backend': 'nvfp4'})[0]


@pytest.mark.parametrize('flag, hint', [
    ('nsa-decode-backend', 'did you mean --dsa-decode-backend'),   # renamed after 0.5.9
    ('hybrid-kvcache-ratio', ''),                                   # deprecated in 0.5.9, gone now
    ('prefill-round-robin-balance', ''),
])
def test_options_removed_since_0_5_9_are_refused(spec, flag, hint):
    errors = _errors(spec, {flag: True})
    assert len(errors) == 1
    assert errors[0].startswith('sglang_server_args: --%s is not an option of this SGLang' % flag)
    assert hint in errors[0]


@pytest.mark.parametrize('flag', ['--aux-hidden-state-capture', '--grpc-worker-threads',
                                  '--enable-flashinfer-allreduce-fusion-backend'])
def test_no_cli_fields_are_not_flags(spec, flag):
    assert flag not in spec['option_strings']


def test_a_no_cli_field_registered_by_hand_is_a_flag(spec):
    # sampling_backend is no_cli in its Struct; add_cli_args registers it with computed choices.
    assert _option(spec, '--sampling-backend')['dest'] == 'sampling_backend'


def test_field_defaults_are_read_from_the_declarations():
    defaults = read_arg_group_defaults(SOURCES)
    assert (defaults['host'], defaults['port'], defaults['tp_size']) == ('127.0.0.1', 30000, 1)
    assert defaults['served_model_name'] is None
    assert 'model_path' not in defaults


SERVER_ARGS = '''
from sglang.srt.arg_groups.argparse_actions import DeprecatedAction
from sglang.srt.arg_groups.fields.core import Core
from sglang.srt.arg_groups.fields.extra import Extra

_INPUT_NAMESPACES = [Core, Extra]


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--old-mode", action=DeprecatedAction,
                            error_message="--old-mode was removed; use --mode instead.")
'''
ACTIONS = '''
import argparse


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, error_message=None, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)
'''
CORE = '''
from __future__ import annotations
from typing import List, Literal, Optional, Union
import msgspec
from sglang.srt.arg_groups.arg_utils import A, Arg

Level = Literal["low", "high"]


class Base(msgspec.Struct):
    model_path: A[str, Arg(help="Model.", aliases=["--model"])]


class Core(Base):
    _NS_PATH = "core"
    level: A[Level, "An alias of a Literal type."] = "low"
    maybe: A[int | None, "PEP 604."] = None
    mixed: A[Optional[Union[str, dict]], "Two types: read as str."] = None
    sizes: A[list[int], "Several."] = msgspec.field(default_factory=list)
    forced: A[str, Arg(help="No default but not required.", required=False)]
    hidden: A[bool, Arg(no_cli=True)] = False
    undocumented: int = 3
'''
EXTRA = '''
from sglang.srt.arg_groups.arg_utils import A, Arg


class Extra(msgspec.Struct):
    _NS_PATH = "extra"
    port: A[int, "Port."] = 30000
'''


def _tree(tmp_path, files):
    for name, text in files.items():
        path = tmp_path.joinpath(*name.split('/'))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return SourceTree(str(tmp_path))


@pytest.fixture
def synthetic_files():
    return {
        'sglang/srt/server_args.py': SERVER_ARGS,
        'sglang/srt/arg_groups/argparse_actions.py': ACTIONS,
        'sglang/srt/arg_groups/fields/core.py': CORE,
        'sglang/srt/arg_groups/fields/extra.py': EXTRA,
    }


def test_synthetic_layout_follows_arg_utils(tmp_path, synthetic_files):
    spec = parse_arg_groups(_tree(tmp_path, synthetic_files))
    assert sorted(spec['options']) == ['--forced', '--level', '--maybe', '--mixed', '--model-path', '--old-mode',
                                       '--port', '--sizes']
    assert spec['option_strings']['--model'] == '--model-path'
    assert _option(spec, '--model-path')['required'] is True
    assert _option(spec, '--forced')['required'] is False
    assert _option(spec, '--level')['choices'] == ['low', 'high']
    assert (_option(spec, '--maybe')['type'], _option(spec, '--mixed')['type']) == ('int', 'str')
    assert (_option(spec, '--sizes')['type'], _option(spec, '--sizes')['nargs']) == ('int', '+')


def test_a_flag_that_sglang_refuses_is_refused_with_its_message(tmp_path, synthetic_files):
    spec = parse_arg_groups(_tree(tmp_path, synthetic_files))
    result = build_server_command(spec, {'model': 'm', 'old-mode': True})
    assert result['errors'] == ['sglang_server_args: --old-mode was removed from this SGLang, which refuses it: '
                                '--old-mode was removed; use --mode instead.']


def test_namespaces_are_found_by_their_marker_without_the_list(tmp_path, synthetic_files):
    synthetic_files['sglang/srt/server_args.py'] = SERVER_ARGS.replace('_INPUT_NAMESPACES = [Core, Extra]', '')
    spec = parse_arg_groups(_tree(tmp_path, synthetic_files))
    assert '--port' in spec['option_strings'] and '--level' in spec['option_strings']
    assert read_arg_group_defaults(_tree(tmp_path, synthetic_files))['port'] == 30000


@pytest.mark.parametrize('change, message', [
    (('hidden: A[bool, Arg(no_cli=True)]', 'hidden: A[bool, Arg(no_cli=compute())]'),
     'the no_cli= of field hidden in sglang.srt.arg_groups.fields.core cannot be read'),
    (('_INPUT_NAMESPACES = [Core, Extra]', '_INPUT_NAMESPACES = [Core, Missing]'),
     'lists Missing, whose class cannot be read'),
])
def test_declarations_that_cannot_be_read_are_an_error(tmp_path, synthetic_files, change, message):
    for name, text in synthetic_files.items():
        synthetic_files[name] = text.replace(*change)
    with pytest.raises(SglangSourceError, match=message):
        parse_arg_groups(_tree(tmp_path, synthetic_files))


def test_declarations_without_options_are_an_error(tmp_path, synthetic_files):
    synthetic_files['sglang/srt/arg_groups/fields/core.py'] = 'class Core:\n    _NS_PATH = "core"\n'
    synthetic_files['sglang/srt/arg_groups/fields/extra.py'] = 'class Extra:\n    _NS_PATH = "extra"\n'
    with pytest.raises(SglangSourceError, match='no field of the arg_groups declarations is a command line option'):
        parse_arg_groups(_tree(tmp_path, synthetic_files))


def _shipped(*path):
    import yaml
    root = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
    with open(os.path.join(root, *path)) as handle:
        return yaml.safe_load(handle)


def test_the_shipped_upgrade_overlay_makes_the_seed_arguments_those_of_0_5_23(spec):
    seed = _shipped('roles', 'sglang_server', 'defaults', 'main.yml')['sglang_server_args']
    upgrade = _shipped('roles', 'serving', 'vars', 'main.yml')['_serving_shipped_experiments']['sglang_upgrade_0_5_23']
    assert upgrade['vars']['sglang_release_set'] == '0.5.23'
    # The seed's own arguments name flags 0.5.23 no longer has ...
    assert any('nsa-decode-backend' in error for error in build_server_command(spec, seed)['errors'])
    # ... which the overlay removes (false) and replaces: nothing left to refuse.
    result = build_server_command(spec, seed, upgrade['vars']['sglang_server_extra_args'])
    assert result['errors'] == []
    assert '--dsa-decode-backend' in result['argv'] and '--nsa-decode-backend' not in result['argv']
    assert any('nsa-decode-backend is removed (false) and is not an option of this SGLang' in note
               for note in result['notes'])


def test_a_flag_a_later_layer_removes_is_not_checked_below_it(spec):
    result = build_server_command(spec, {'model-path': 'org/model', 'no-such-flag': 'x', 'tp-size': 'eight'},
                                  {'no-such-flag': False, 'tp-size': None})
    assert result['errors'] == []
    # A flag the later layer sets again is checked as set there.
    result = build_server_command(spec, {'model-path': 'org/model', 'no-such-flag': False},
                                  {'no-such-flag': 'x'})
    assert any('no-such-flag' in error for error in result['errors'])
