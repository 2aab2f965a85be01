# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router argument module finds the router_args.py of the package it is told, in a venv laid out
as pip lays it out, with the file from the real wheel."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json

import pytest

from ansible_collections.inferops.serving.plugins.modules import sglang_router_args
from ansible_collections.inferops.serving.tests.utils.module_result import run_in_process

MEMBERS = {'sglang-router': 'sglang_router/router_args.py', 'smg': 'smg/router_args.py'}
ROLE_DEFAULT_ARGS = {'host': '0.0.0.0', 'port': 30000, 'policy': 'cache_aware', 'prometheus-host': '0.0.0.0',
                     'prometheus-port': 29000, 'health-check-interval-secs': 10}


@pytest.fixture
def router_venv(tmp_path, router_wheel_file):
    """Callable: package -> a venv whose site-packages holds that package's real router_args.py."""
    def make(package):
        target = tmp_path / package / 'lib' / 'python3.11' / 'site-packages' / MEMBERS[package]
        target.parent.mkdir(parents=True)
        target.write_text(router_wheel_file(package, MEMBERS[package]))
        return str(tmp_path / package)
    return make


def _run(capsys, args):
    return run_in_process(sglang_router_args.main, args, capsys)


@pytest.mark.parametrize('package, module, title', [('sglang-router', 'sglang_router.launch_router', 'sglang::router'),
                                                    ('smg', 'smg.launch_router', 'smg::router')])
def test_each_package_is_read_from_its_own_file(router_venv, capsys, package, module, title):
    result = _run(capsys, {'venv_path': router_venv(package), 'package': package, 'args': ROLE_DEFAULT_ARGS})
    assert result.get('failed') is not True, result
    assert result['checked'] and result['router_args_path'].endswith(MEMBERS[package])
    assert (result['launch_module'], result['process_title']) == (module, title)
    assert result['exec_args'] == ('--host 0.0.0.0 --port 30000 --policy cache_aware --prometheus-host 0.0.0.0'
                                   ' --prometheus-port 29000 --health-check-interval-secs 10')


def test_a_venv_of_the_other_package_names_the_package_to_install(router_venv, capsys):
    result = _run(capsys, {'venv_path': router_venv('sglang-router'), 'package': 'smg', 'args': {}})
    assert result['failed'] and 'smg/router_args.py does not exist: install smg into the venv first' in result['msg']


def test_check_mode_before_the_install_shows_the_command_line_it_would_write(tmp_path, capsys):
    result = _run(capsys, {'venv_path': str(tmp_path / 'none'), 'package': 'smg', 'args': ROLE_DEFAULT_ARGS,
                           'allow_missing': True})
    assert result['checked'] is False and result['launch_module'] == 'smg.launch_router'
    assert result['documentation'].startswith('https://')
    # Unchecked, but what the unit's diff shows.
    assert result['exec_args'] == ('--host 0.0.0.0 --port 30000 --policy cache_aware --prometheus-host 0.0.0.0'
                                   ' --prometheus-port 29000 --health-check-interval-secs 10')


@pytest.mark.parametrize('key', ['api-key', 'tenant_api_key', '--control-plane-api-keys', 'redis-url'])
def test_check_mode_before_the_install_still_refuses_a_secret(tmp_path, capsys, key):
    result = _run(capsys, {'venv_path': str(tmp_path / 'none'), 'package': 'smg', 'allow_missing': True,
                           'args': {key: 'sk-in-check-mode'}})
    assert result['failed'] and 'must not be set here' in result['msg']
    assert 'sk-in-check-mode' not in result['msg'] + json.dumps(result['errors'])


def test_an_option_only_smg_has_is_refused_by_sglang_router(router_venv, capsys):
    args = dict(ROLE_DEFAULT_ARGS, **{'log-json': True})
    assert _run(capsys, {'venv_path': router_venv('smg'), 'package': 'smg', 'args': args})['checked']
    refused = _run(capsys, {'venv_path': router_venv('sglang-router'), 'args': args})
    assert refused['failed'] and '--log-json is not an option of this router' in refused['msg']
