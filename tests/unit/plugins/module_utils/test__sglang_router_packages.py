# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router packages the role knows, against the real wheels and the role's own files."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import re
import runpy

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils import _sglang_router_packages
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_packages import (
    ROUTER_PACKAGES,
    admin_key_errors,
    forwarded_key_errors,
    package_version_errors,
)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))


def read_yaml(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return yaml.safe_load(handle)


def test_the_roles_choices_and_default_are_the_tables():
    spec = read_yaml('roles', 'sglang_router', 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
    defaults = read_yaml('roles', 'sglang_router', 'defaults', 'main.yml')
    assert sorted(spec['sglang_router_package']['choices']) == sorted(ROUTER_PACKAGES)
    assert defaults['sglang_router_package'] == _sglang_router_packages.DEFAULT_PACKAGE
    # The default release is the one the collection is verified with.
    assert defaults['sglang_router_version'] == ROUTER_PACKAGES[defaults['sglang_router_package']]['verified_version']


@pytest.mark.parametrize('package', sorted(ROUTER_PACKAGES))
def test_each_package_is_what_its_wheel_holds(router_wheel_file, package):
    facts = ROUTER_PACKAGES[package]
    launch = router_wheel_file(package, facts['launch_module'].replace('.', '/') + '.py')
    # launch_router sets the process title the tests and operators look for.
    assert 'setproctitle.setproctitle("%s")' % facts['process_title'] in launch
    version = facts['verified_version']
    metadata = router_wheel_file(package, '%s-%s.dist-info/METADATA' % (package.replace('-', '_'), version))
    assert re.search(r'^Name: %s$' % re.escape(package), metadata, re.MULTILINE)
    assert re.search(r'^Version: %s$' % re.escape(version), metadata, re.MULTILINE)
    assert not package_version_errors(package, version)


def test_sglang_router_also_installs_smg_s_command(router_wheel_file):
    # Why the two never share a venv.
    entry_points = router_wheel_file('sglang-router', 'sglang_router-0.3.2.dist-info/entry_points.txt')
    assert re.search(r'^smg ?= ?', entry_points, re.MULTILINE)
    assert re.search(r'^smg ?= ?', router_wheel_file('smg', 'smg-1.13.0.dist-info/entry_points.txt'), re.MULTILINE)


def test_the_lab_image_reads_the_table_without_the_collection():
    table = runpy.run_path(_sglang_router_packages.__file__)['ROUTER_PACKAGES']
    assert dict((name, facts['verified_version']) for name, facts in table.items()) == {
        'sglang-router': '0.3.2', 'smg': '1.13.0'}


@pytest.mark.parametrize('package, version, words', [
    ('smg', '0.3.2', 'set sglang_router_version: "1.13.0"'),
    ('sglang-router', '1.13.0', 'set sglang_router_version: "0.3.2"'),
    ('sglang-router', '1.13.0', 'sglang_router_package: smg to stay on smg'),
])
def test_a_version_of_the_other_package_is_named(package, version, words):
    problems = package_version_errors(package, version)
    assert len(problems) == 1 and words in problems[0]


@pytest.mark.parametrize('package, version', [('smg', '1.13.0'), ('smg', '2.0.1'), ('sglang-router', '0.2.1'),
                                              ('sglang-router', 'latest')])
def test_a_version_of_the_package_passes(package, version):
    # A version that is no version is the version check's to name.
    assert package_version_errors(package, version) == []


@pytest.mark.parametrize('package, client, admin, words', [
    ('smg', 'k', '', 'set sglang_router_admin_api_key'),
    ('smg', 'k', 'k', 'must differ'),
    ('sglang-router', 'k', 'a', 'smg only'),
    ('sglang-router', '', 'a', 'smg only'),
])
def test_who_may_change_the_worker_list(package, client, admin, words):
    problems = admin_key_errors(package, client, admin)
    assert len(problems) == 1 and words in problems[0]


@pytest.mark.parametrize('package, client, admin', [('smg', 'k', 'a'), ('smg', '', ''), ('smg', '', 'a'),
                                                    ('sglang-router', 'k', ''), ('sglang-router', '', '')])
def test_keys_that_work(package, client, admin):
    assert admin_key_errors(package, client, admin) == []


@pytest.mark.parametrize('package, client, server, refused', [
    ('smg', 'clients-key', 'servers-key', True),
    # The same key, or servers without one, take whatever the client sends.
    ('smg', 'servers-key', 'servers-key', False),
    ('smg', 'clients-key', '', False),
    # Clients that send no key: smg sends the key the worker was registered with.
    ('smg', '', 'servers-key', False),
    # sglang-router sends the registered key whatever the client sent.
    ('sglang-router', 'clients-key', 'servers-key', False),
])
def test_behind_smg_the_clients_key_must_be_one_the_servers_take(package, client, server, refused):
    problems = forwarded_key_errors('router-1', package, client, server, 'gpu-node-1')
    assert bool(problems) == refused
    if refused:
        assert 'sglang_router_api_key' in problems[0] and 'sglang_server_api_key of gpu-node-1' in problems[0]
        assert 'router-1' in problems[0]
        assert 'clients-key' not in problems[0] and 'servers-key' not in problems[0]
