# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's preflight as it runs: the variables and types from the role's own argument specs,
then the role's rules, against the defaults the role ships and against wrong values."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils._inputs import ROLES, role_errors

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
ROLES_DIR = os.path.join(REPO_ROOT, 'roles')


def read_yaml(*parts):
    with open(os.path.join(ROLES_DIR, *parts)) as handle:
        return yaml.safe_load(handle) or {}


def options(role):
    return read_yaml(role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options']


def defaults(role):
    """The role's defaults; a templated default stands for a value of the right kind."""
    values = read_yaml(role, 'defaults', 'main.yml')
    stand_ins = {'str': '/templated', 'path': '/templated', 'int': 1, 'float': 0.5, 'bool': False,
                 'list': [], 'dict': {}}
    # A templated address stands for the address it renders to.
    named_stand_ins = {'serving_worker_address': '10.0.0.11'}
    spec = options(role)
    return dict((name, named_stand_ins.get(name, stand_ins[spec.get(name, {}).get('type', 'str')])
                 if isinstance(value, str) and '{{' in value else value) for name, value in values.items())


@pytest.mark.parametrize('role', sorted(ROLES))
def test_the_shipped_defaults_pass(role):
    assert role_errors(role, options(role), defaults(role)) == []


@pytest.mark.parametrize('role', sorted(ROLES))
def test_every_role_checks_its_inputs_with_one_call_per_entry_point_it_checks(role):
    """One preflight style: the action reads the names and types from the role's argument specs, never
    from a list kept by hand; no role keeps an assert of its own over its variables."""
    calls = {}
    for folder, _dirs, names in sorted(os.walk(os.path.join(ROLES_DIR, role, 'tasks'))):
        for name in sorted(names):
            for task in read_yaml(folder, name) if name.endswith('.yml') else []:
                if 'inferops.serving.role_inputs' in task:
                    entry_point = (task['inferops.serving.role_inputs'] or {}).get('entry_point', 'main')
                    calls.setdefault(entry_point, []).append(name)
    assert calls and all(len(files) == 1 for files in calls.values()), calls
    specs = read_yaml(role, 'meta', 'argument_specs.yml')['argument_specs']
    assert set(calls) <= set(specs)


# (role, variable, wrong value, words the user needs)
WRONG = [
    ('monitoring', 'monitoring_prometheus_listen_address', '9090', 'must look like 127.0.0.1:9090'),
    ('monitoring', 'monitoring_prometheus_listen_address', '127.0.0.1:70000', 'a port from 1 to 65535'),
    ('monitoring', 'monitoring_scrape_interval', '30 seconds', 'Prometheus duration such as 30s'),
    ('monitoring', 'monitoring_alert_throughput_share', 1.5, 'a fraction in (0, 1] (got 1.5)'),
    ('monitoring', 'monitoring_alert_gpu_power_share', 0, 'a fraction in (0, 1] (got 0)'),
    ('monitoring', 'monitoring_sglang_port', 0, 'TCP port from 1 to 65535'),
    ('monitoring', 'monitoring_sglang_port', [8000], 'must be a whole number, got a list'),
    ('monitoring', 'monitoring_alert_gpu_unhealthy_for', 'a minute', 'Prometheus duration such as 30s'),
    ('node_metrics', 'node_metrics_gpu_expected_count', -1, 'a GPU count (0: not checked) of at least 0'),
    ('node_metrics', 'node_metrics_port', 70000, 'node_metrics_port must be a TCP port'),
    ('node_metrics', 'node_metrics_textfile_dir', 'var/lib/x', 'absolute path'),
    ('node_metrics', 'node_metrics_gpu_interval', 2, 'node_metrics_gpu_interval must be seconds of at least 5'),
    ('node_metrics', 'node_metrics_timeout', 60, 'must be shorter than node_metrics_gpu_interval'),
    ('node_metrics', 'node_metrics_sglang_health_url', 'localhost:8000/health', 'http(s):// URL'),
    ('serving', 'serving_deploy_serial', 0, 'serving_deploy_serial must be a number of nodes of at least 1'),
    ('serving', 'serving_max_regression', 1, 'serving_max_regression is a fraction in [0, 1), e.g. 0.1 for 10%'),
    ('serving', 'serving_max_baseline_age', -1, 'serving_max_baseline_age must be seconds of at least 0'),
    ('serving', 'serving_benchmark_repeats', 0, '3 or more measure the noise'),
    ('serving', 'serving_gate_min_effect', 1, 'serving_gate_min_effect is a fraction in [0, 1)'),
    ('serving', 'serving_lock_max_logprob_divergence', -0.5, '0 or more nats'),
    ('serving', 'serving_lock_prompts', [], 'needs at least one prompt while serving_lock_enabled is true'),
    ('serving', 'serving_max_regression', 'ten percent', 'serving_max_regression must be a number, got the text'),
    ('serving', 'serving_host_experiment_timeout', 0, "the check's hard timeout in seconds of at least 1"),
    ('serving', 'serving_vm_boot_timeout', 0, 'serving_vm_boot_timeout must be seconds of at least 1'),
    ('serving', 'serving_drain_interval', 0, 'serving_drain_interval must be seconds of at least 1'),
    ('serving', 'serving_drain_timeout', -5, 'serving_drain_timeout must be seconds of at least 0'),
    ('serving', 'serving_router_join_timeout', 0, 'serving_router_join_timeout must be seconds of at least 1'),
    ('serving', 'serving_rollback_health_timeout', 0, 'serving_rollback_health_timeout must be seconds of at least 1'),
    ('serving', 'serving_worker_address', 'http://10.0.0.11', 'without scheme, port or path (e.g. 10.0.0.11)'),
    ('serving', 'serving_worker_address', '10.0.0.11:8000', 'without scheme, port or path'),
    ('serving', 'serving_worker_address', '10.0.0.300', 'a host name or an IP address'),
    ('serving', 'serving_worker_address', 'gpu node 1', 'a host name or an IP address'),
    ('serving', 'serving_worker_address', '', 'must be a host name or an IP address'),
    ('sglang_router', 'sglang_router_health_timeout', 0, 'sglang_router_health_timeout must be seconds'),
    ('sglang_router', 'sglang_router_api_key', 'two words', 'white space'),
    ('sglang_router', 'sglang_router_package', 'sglang-router-rs', 'must be one of sglang-router, smg'),
    ('sglang_router', 'sglang_router_version', 'latest', 'exact version'),
    ('sglang_router', 'sglang_router_version', '1.13.0', 'or sglang_router_package: smg to stay on smg'),
    ('sglang_router', 'sglang_router_admin_api_key', 'admin-key', 'used with sglang_router_package: smg only'),
    ('sglang_router', 'sglang_router_args', {'api-key': 'sk-router'}, 'Set sglang_router_api_key (vault it) instead'),
    ('sglang_router', 'sglang_router_extra_args', {'tenant-api-key': ['a:sk']}, 'looks like a secret'),
    ('sglang_server', 'sglang_server_args', ['--model-path', 'x'], 'must be a mapping (key: value), got a list'),
    ('gpu_vm', 'gpu_vm_reboot_timeout', 'soon', 'must be a whole number, got the text'),
]


@pytest.mark.parametrize('role, name, value, words', WRONG, ids=['%s=%r' % (w[1], w[2]) for w in WRONG])
def test_a_wrong_value_is_named_with_what_to_change(role, name, value, words):
    values = dict(defaults(role), **{name: value})
    # The setting that makes the value matter, as a user would give it on the command line.
    values.update({'serving_lock_prompts': {'serving_lock_enabled': 'true'},
                   'node_metrics_timeout': {'node_metrics_gpu_collector': True}}.get(name, {}))
    problems = role_errors(role, options(role), values)
    assert any(words in problem and name in problem for problem in problems), problems


# smg: the variables that together make a router that works, and what each wrong pair says.
@pytest.mark.parametrize('settings, words', [
    ({'sglang_router_version': '0.3.2'}, 'sglang_router_version: "1.13.0"'),
    ({'sglang_router_api_key': 'servers-key'}, 'set sglang_router_admin_api_key'),
    ({'sglang_router_api_key': 'servers-key', 'sglang_router_admin_api_key': 'servers-key'},
     'sglang_router_admin_api_key must differ from sglang_router_api_key'),
    ({'sglang_router_admin_api_key': 'bad key'}, 'white space'),
])
def test_smg_settings_that_cannot_work_are_named(settings, words):
    values = dict(defaults('sglang_router'), sglang_router_package='smg', sglang_router_version='1.13.0')
    values.update(settings)
    problems = role_errors('sglang_router', options('sglang_router'), values)
    assert any(words in problem for problem in problems), problems
    assert not any('servers-key' in problem or 'bad key' in problem for problem in problems)


@pytest.mark.parametrize('settings', [
    {},
    {'sglang_router_api_key': 'servers-key', 'sglang_router_admin_api_key': 'admin-key'},
    {'sglang_router_admin_api_key': 'admin-key'},
    {'sglang_router_version': '1.14.2'},
])
def test_smg_settings_that_work_pass(settings):
    values = dict(defaults('sglang_router'), sglang_router_package='smg', sglang_router_version='1.13.0')
    values.update(settings)
    assert role_errors('sglang_router', options('sglang_router'), values) == []


def test_types_come_before_rules_so_that_a_rule_never_reads_a_value_of_the_wrong_type():
    values = dict(defaults('node_metrics'), node_metrics_gpu_interval=[5], node_metrics_timeout=60)
    assert role_errors('node_metrics', options('node_metrics'), values) == [
        'node_metrics_gpu_interval must be a whole number, got a list.']


def test_a_secret_in_a_wrong_value_is_never_repeated():
    problems = role_errors('sglang_router', options('sglang_router'),
                           dict(defaults('sglang_router'), sglang_router_api_key='sk live"key'))
    assert problems and not any(re.search('sk live', p) for p in problems)
