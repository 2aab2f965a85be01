# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._secrets import ROUTER_SECRET_DESTS
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_args import (
    MANAGED_DESTS,
    argparse_defaults,
    build_router_command,
    parse_router_args_source,
    plain_option_source,
)

FIXTURE = os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang_router', '0.3.2', 'router_args.py.txt')


@pytest.fixture(scope='module')
def source():
    with open(FIXTURE) as handle:
        return handle.read()


@pytest.fixture(scope='module')
def spec(source):
    return parse_router_args_source(source)


def test_prefixed_option_names_read_as_launch_router_defines_them(source, spec):
    assert 'f"--{prefix}policy"' in source
    assert "'--policy'" in plain_option_source(source)
    assert spec['options']['--policy']['choices'] == ['random', 'round_robin', 'cache_aware', 'power_of_two', 'manual']
    assert spec['options']['--prometheus-port']['type'] == 'int'
    assert not spec['options']['--dp-aware']['takes_value']
    assert '--router-policy' not in spec['option_strings']


def test_parser_defaults_win_over_the_dataclass(source):
    defaults = argparse_defaults(source)
    # The dataclass says None; the parser sets 29000, which is what launch_router uses.
    assert defaults['prometheus_port'] == 29000
    assert defaults['policy'] == 'cache_aware'
    assert defaults['port'] == 30000


def test_default_router_command(source, spec):
    result = build_router_command(spec, {'host': '0.0.0.0', 'port': 30000, 'policy': 'cache_aware',
                                         'prometheus-port': 29000, 'health-check-interval-secs': 10},
                                  argparse_defaults(source))
    assert result['errors'] == []
    assert result['argv'] == ['--host', '0.0.0.0', '--port', '30000', '--policy', 'cache_aware',
                              '--prometheus-port', '29000', '--health-check-interval-secs', '10']
    assert (result['port'], result['prometheus_port'], result['policy']) == (30000, 29000, 'cache_aware')


def test_prometheus_port_defaults_when_not_given(source, spec):
    result = build_router_command(spec, {}, argparse_defaults(source))
    assert result['prometheus_port'] == 29000 and result['argv'] == []


@pytest.mark.parametrize('args, message', [
    ({'policy': 'fastest'}, '--policy=fastest is not valid; allowed: random, round_robin, cache_aware'),
    ({'polcy': 'random'}, '--polcy is not an option of this router; did you mean --policy'),
    ({'port': 'http'}, '--port=http is not a valid int'),
    ({'dp-aware': 'yes'}, '--dp-aware is a bare flag'),
    ({'api-key': 'secret'}, '--api-key must not be set here'),
    ({'control-plane-api-keys': ['a:b:admin:c']}, '--control-plane-api-keys must not be set here'),
    ({'worker-urls': ['http://w1:8000']}, "--worker-urls is not supported: workers are registered through the router's /workers API"),
])
def test_bad_router_arguments_are_named(source, spec, args, message):
    result = build_router_command(spec, args, argparse_defaults(source))
    assert result['argv'] == []
    assert any(message in error for error in result['errors']), result['errors']
    assert all('secret' not in error for error in result['errors'])


# The reader against both routers the role installs, read from their real wheels (tests/unit/conftest.py).
ROUTER_SOURCES = [('sglang-router', 'sglang_router/router_args.py'), ('smg', 'smg/router_args.py')]


@pytest.fixture(scope='module', params=ROUTER_SOURCES, ids=[package for package, _member in ROUTER_SOURCES])
def wheel_router(request, router_wheel_file):
    package, member = request.param
    text = router_wheel_file(package, member)
    return package, text, parse_router_args_source(text)


def test_the_committed_copy_is_the_file_of_the_wheel(router_wheel_file, source):
    assert router_wheel_file('sglang-router', 'sglang_router/router_args.py') == source


def test_each_router_reads_without_unresolved_options(wheel_router):
    package, _text, spec = wheel_router
    expected = {'sglang-router': 98, 'smg': 213}[package]
    assert len(spec['options']) == expected
    for flag in ('--host', '--port', '--policy', '--prometheus-host', '--prometheus-port', '--health-check-interval-secs',
                 '--api-key', '--control-plane-api-keys'):
        assert flag in spec['options'], flag
    assert all(flag.startswith('--') and '{' not in flag for flag in spec['option_strings'])


def test_the_roles_default_command_is_valid_for_each_router(wheel_router):
    _package, text, spec = wheel_router
    result = build_router_command(spec, {'host': '0.0.0.0', 'port': 30000, 'policy': 'cache_aware',
                                         'prometheus-host': '0.0.0.0', 'prometheus-port': 29000,
                                         'health-check-interval-secs': 10}, argparse_defaults(text))
    assert result['errors'] == []
    assert result['argv'] == ['--host', '0.0.0.0', '--port', '30000', '--policy', 'cache_aware', '--prometheus-host',
                              '0.0.0.0', '--prometheus-port', '29000', '--health-check-interval-secs', '10']
    assert (result['port'], result['prometheus_port'], result['policy']) == (30000, 29000, 'cache_aware')


def test_every_managed_and_secret_option_is_one_of_a_real_router(router_wheel_file):
    dests = set()
    for package, member in ROUTER_SOURCES:
        dests |= set(o['dest'] for o in parse_router_args_source(router_wheel_file(package, member))['options'].values())
    assert set(MANAGED_DESTS) <= dests
    assert set(ROUTER_SECRET_DESTS) <= dests


# smg's ways of giving the router workers, each refused as --worker-urls is.
@pytest.mark.parametrize('args', [
    {'epd-disaggregation': True}, {'encode': ['http://e1:8000']}, {'discovery-provider': 'file'},
    {'discovery-file': '/etc/sglang-router/workers.yaml'}, {'enable-mesh': True},
    {'mesh-peer-urls': ['http://router-2:39527']}, {'enable-rl': True}, {'worker-urls': ['http://w1:8000']},
    {'service-discovery': True}, {'pd-disaggregation': True},
])
def test_smg_refuses_every_other_way_of_giving_workers(router_wheel_file, args):
    text = router_wheel_file('smg', 'smg/router_args.py')
    result = build_router_command(parse_router_args_source(text), args, argparse_defaults(text))
    assert result['argv'] == []
    assert any("is not supported: workers are registered through the router's /workers API" in error
               for error in result['errors']), result['errors']


@pytest.mark.parametrize('args, flag', [
    ({'tenant-api-key': ['team-a:sk-tenant']}, '--tenant-api-key'),
    ({'control-plane-api-keys': ['ops:Ops:admin:k']}, '--control-plane-api-keys'),
    ({'api-key': 'k'}, '--api-key'),
    ({'redis-url': 'redis://:pw@cache:6379'}, '--redis-url'),
])
def test_smg_refuses_secrets_on_its_command_line(router_wheel_file, args, flag):
    text = router_wheel_file('smg', 'smg/router_args.py')
    result = build_router_command(parse_router_args_source(text), args, argparse_defaults(text))
    assert result['argv'] == []
    assert any('%s must not be set here' % flag in error and 'sglang_router_admin_api_key' in error
               for error in result['errors']), result['errors']
    assert not any('sk-tenant' in error or ':pw@' in error for error in result['errors'])


def test_smg_knows_what_sglang_router_did_not(wheel_router):
    package, text, spec = wheel_router
    result = build_router_command(spec, {'policy': 'least_load', 'log-json': True}, argparse_defaults(text))
    if package == 'smg':
        assert result['errors'] == [] and result['argv'] == ['--policy', 'least_load', '--log-json']
    else:
        assert any('--policy=least_load is not valid' in error for error in result['errors']), result['errors']
