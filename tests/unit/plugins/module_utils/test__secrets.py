# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The secret names match what SGLang, its router and the node's launcher really use."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import importlib.machinery
import importlib.util
import os
import re

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_args import parse_router_args_source
from ansible_collections.inferops.serving.plugins.module_utils._secrets import (
    ROUTER_SECRET_DESTS,
    SECRET_ENV_NAMES,
    SERVER_SECRET_DESTS,
    SERVER_SECRET_FLAGS,
    flag_looks_secret,
)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
SERVER_ARGS = os.path.join(HERE, 'fixtures', 'sglang', '0.5.9', 'sglang', 'srt', 'server_args.py.txt')
# 0.5.23 declares its options as fields of these structs; a field's name is its dest and flag.
FIELDS_0_5_23 = os.path.join(HERE, 'fixtures', 'sglang', '0.5.23', 'sglang', 'srt', 'arg_groups', 'fields')
ROUTER_ARGS = os.path.join(HERE, 'fixtures', 'sglang_router', '0.3.2', 'router_args.py.txt')
LAUNCHER_SECRET_NAMES = os.path.join(REPO, 'roles', 'sglang_launcher', 'files', 'sglang_launch', 'secret_names.py')


def read(path):
    with open(path) as handle:
        return handle.read()


def dataclass_fields(path):
    """Field names of the ServerArgs / RouterArgs dataclass: what argparse's dests become."""
    return set(re.findall(r'^    ([a-z_][a-z0-9_]*): ', read(path), re.MULTILINE))


def option_strings(path):
    """Every option string SGLang's add_argument calls name, one per line in its source."""
    return set(re.findall(r'^\s*"(--[a-z][a-z0-9-]*)",\s*$', read(path), re.MULTILINE))


def fields_0_5_23():
    names = set()
    for name in os.listdir(FIELDS_0_5_23):
        names |= dataclass_fields(os.path.join(FIELDS_0_5_23, name))
    return names


def router_dests(source):
    return set(option['dest'] for option in parse_router_args_source(source)['options'].values())


def test_every_secret_dest_is_a_real_option(router_wheel_file):
    assert set(SERVER_SECRET_DESTS) <= dataclass_fields(SERVER_ARGS)
    assert set(SERVER_SECRET_DESTS) <= fields_0_5_23()
    assert set(ROUTER_SECRET_DESTS) - {'tenant_api_key'} <= dataclass_fields(ROUTER_ARGS)
    # The parsers' dests, as the router argument check compares them (smg's dataclass field is
    # tenant_api_keys, its option's dest tenant_api_key).
    assert set(ROUTER_SECRET_DESTS) <= router_dests(router_wheel_file('smg', 'smg/router_args.py'))
    assert set(ROUTER_SECRET_DESTS) - router_dests(router_wheel_file('sglang-router', 'sglang_router/router_args.py')) \
        == {'tenant_api_key'}


@pytest.mark.parametrize('package, member', [('sglang-router', 'sglang_router/router_args.py'),
                                             ('smg', 'smg/router_args.py')])
def test_of_all_router_options_the_secret_ones_are_refused(router_wheel_file, package, member):
    # Keys, passwords and URLs that embed credentials; a path to a key file (--tls-key-path) is none.
    options = parse_router_args_source(router_wheel_file(package, member))['options']
    looks_secret = set(option['dest'] for flag, option in options.items()
                       if flag_looks_secret(flag) or flag.endswith(('-keys', '-db-url', '-redis-url')))
    assert 'api_key' in looks_secret and looks_secret <= set(ROUTER_SECRET_DESTS)


# 0.5.23 adds --ssl-keyfile-password: a secret too, with no vault-able variable of its own, so
# the input check refuses it on the command line like any other secret-looking flag.
@pytest.mark.parametrize('release, also_secret', [('0.5.9', set()), ('0.5.23', {'--ssl-keyfile-password'})])
def test_of_all_sglang_flags_only_the_keys_and_passwords_look_secret(release, also_secret):
    if release == '0.5.9':
        flags = option_strings(SERVER_ARGS)
    else:
        flags = set('--' + name.replace('_', '-') for name in fields_0_5_23())
    assert len(flags) > 300
    secret_looking = set(flag for flag in flags if flag_looks_secret(flag))
    assert secret_looking == set('--' + flag for flag in SERVER_SECRET_FLAGS) | also_secret


@pytest.mark.parametrize('key', ['api-key', '--api-key', 'api_key', 'API-KEY', 'admin-api-key', '--admin_api_key',
                                 'api', '--admin', 'hf-token', 'my-apikey', 'db-password', 'oauth-client-secret',
                                 'aws-credential-file'])
def test_secret_looking_flags(key):
    assert flag_looks_secret(key)


@pytest.mark.parametrize('key', ['model-path', 'max-total-tokens', '--max-prefill-tokens', 'tokenizer-path', 'ap',
                                 'port', 'keep-mm-feature-on-device'])
def test_flags_that_carry_no_secret(key):
    assert not flag_looks_secret(key)


def test_the_launcher_on_the_node_names_the_same_secrets():
    # The launcher runs on the node without this collection, so it keeps its own copy of the names.
    loader = importlib.machinery.SourceFileLoader('sglang_launch_secrets', LAUNCHER_SECRET_NAMES)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    launcher = importlib.util.module_from_spec(spec)
    loader.exec_module(launcher)
    assert tuple(launcher.SECRET_FIELDS) == SERVER_SECRET_DESTS
    assert [flag for _env, flag in launcher.SECRET_ENV_FLAGS] == ['--' + flag for flag in SERVER_SECRET_FLAGS]
    assert set(flag[2:].replace('-', '_') for _env, flag in launcher.ROUTER_SECRET_ENV_FLAGS) <= set(ROUTER_SECRET_DESTS)
    env_names = ([env for env, _flag in launcher.SECRET_ENV_FLAGS + launcher.ROUTER_SECRET_ENV_FLAGS]
                 + [env for env, _path in launcher.SECRET_ENV_FILES])
    assert set(env_names) <= set(SECRET_ENV_NAMES)


# env_line('HF_TOKEN', sglang_server_hf_token) in the server's file, SGLANG_API_KEY="{{ sglang_router_api_key ...
WRITTEN_SECRET = re.compile(r"([A-Z][A-Z0-9_]*)(?:', |=\"\{\{ )sglang_[a-z_]*(?:api_key|hf_token)\b")


@pytest.mark.parametrize('template', ['roles/sglang_server/templates/sglang.env.j2',
                                      'roles/sglang_router/templates/sglang-router.env.j2'])
def test_the_environment_files_write_secrets_under_names_the_input_check_refuses(template):
    names = set(WRITTEN_SECRET.findall(read(os.path.join(REPO, template))))
    assert names and names <= set(SECRET_ENV_NAMES)
