# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""scripts/lint_roles.py passes on the collection and fails on each kind of planted problem."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, 'scripts', 'lint_roles.py')


def lint(root):
    return subprocess.run([sys.executable, SCRIPT, str(root)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)


@pytest.fixture
def tree(tmp_path):
    for name in ('roles', 'playbooks', 'inventories'):
        shutil.copytree(os.path.join(ROOT, name), str(tmp_path / name))
    shutil.copy(os.path.join(ROOT, 'deploy.yml'), str(tmp_path / 'deploy.yml'))
    shutil.copytree(os.path.join(ROOT, 'molecule', 'default'), str(tmp_path / 'molecule' / 'default'))
    return tmp_path


def test_the_collection_passes():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout


def test_a_playbook_reading_a_private_register_of_a_role_fails(tree):
    with open(str(tree / 'playbooks' / 'deploy.yml'), 'a') as handle:
        handle.write('    - name: Peek\n      ansible.builtin.debug:\n        msg: "{{ __sglang_server_command.args }}"\n')
    result = lint(tree)
    assert result.returncode == 1
    assert 'playbooks/deploy.yml:' in result.stdout
    assert 'reads __sglang_server_command, private to role sglang_server' in result.stdout


def test_a_role_reading_another_roles_private_constant_fails(tree):
    with open(str(tree / 'roles' / 'serving' / 'tasks' / 'summary.yml'), 'a') as handle:
        handle.write('# {{ _sglang_constraints_file }}\n')
    result = lint(tree)
    assert result.returncode == 1
    assert 'roles/serving/tasks/summary.yml' in result.stdout and 'private to role sglang:' in result.stdout


def test_a_scenario_of_another_role_may_not_look_inside_it(tree):
    with open(str(tree / 'molecule' / 'default' / 'converge.yml'), 'a') as handle:
        handle.write('# {{ __sglang_patch }}\n')
    assert 'molecule/default/converge.yml:' in lint(tree).stdout


def test_an_option_without_its_default_fails(tree):
    path = str(tree / 'roles' / 'sglang_server' / 'meta' / 'argument_specs.yml')
    with open(path) as handle:
        text = handle.read()
    with open(path, 'w') as handle:
        handle.write(text.replace('        default: 120\n', '', 1))
    result = lint(tree)
    assert result.returncode == 1
    assert 'gives sglang_server_stop_timeout no default' in result.stdout


def test_a_default_that_differs_from_the_spec_fails(tree):
    path = str(tree / 'roles' / 'serving' / 'defaults' / 'main.yml')
    with open(path) as handle:
        text = handle.read()
    with open(path, 'w') as handle:
        handle.write(text.replace('serving_max_regression: 0.1', 'serving_max_regression: 0.2'))
    assert 'serving_max_regression defaults to 0.1 in meta/argument_specs.yml but 0.2' in lint(tree).stdout


def test_an_undocumented_default_and_a_variable_nothing_reads_fail(tree):
    with open(str(tree / 'roles' / 'sglang' / 'defaults' / 'main.yml'), 'a') as handle:
        handle.write('sglang_forgotten_knob: 3\n')
    result = lint(tree)
    assert 'sglang_forgotten_knob is in defaults/main.yml but not in meta/argument_specs.yml' in result.stdout
    assert 'sglang_forgotten_knob is a role variable that nothing reads' in result.stdout
