# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_args import (
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
