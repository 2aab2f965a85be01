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
    # Every folder the lint reads for variables, so that the copy is as clean as the collection and
    # each planted problem is the only one.
    for name in ('roles', 'playbooks', 'inventories', 'molecule'):
        shutil.copytree(os.path.join(ROOT, name), str(tmp_path / name),
                        ignore=shutil.ignore_patterns('__pycache__', '.cache'))
    shutil.copy(os.path.join(ROOT, 'deploy.yml'), str(tmp_path / 'deploy.yml'))
    return tmp_path


@pytest.fixture
def tree_with_plugins(tree):
    shutil.copytree(os.path.join(ROOT, 'plugins'), str(tree / 'plugins'), ignore=shutil.ignore_patterns('__pycache__'))
    return tree


def append(path, text):
    with open(str(path), 'a') as handle:
        handle.write(text)


def line_count(path):
    with open(str(path)) as handle:
        return len(handle.read().splitlines())


def problems(result):
    return [line for line in result.stdout.splitlines() if not line.endswith('between roles, playbooks and plugins')]


def test_the_collection_passes():
    result = lint(ROOT)
    assert problems(result) == [], result.stdout
    assert result.returncode == 0


def test_the_copied_trees_are_clean(tree):
    result = lint(tree)
    assert problems(result) == [] and result.returncode == 0, result.stdout
    shutil.copytree(os.path.join(ROOT, 'plugins'), str(tree / 'plugins'), ignore=shutil.ignore_patterns('__pycache__'))
    result = lint(tree)
    assert problems(result) == [] and result.returncode == 0, result.stdout


def test_a_playbook_reading_a_private_register_of_a_role_fails(tree):
    with open(str(tree / 'playbooks' / 'deploy.yml'), 'a') as handle:
        handle.write('    - name: Peek\n      ansible.builtin.debug:\n        msg: "{{ __sglang_server_command.args }}"\n')
    result = lint(tree)
    assert result.returncode == 1
    assert 'playbooks/deploy.yml:' in result.stdout
    assert 'reads __sglang_server_command, private to role sglang_server' in result.stdout


def test_a_role_reading_another_roles_private_constant_fails(tree):
    with open(str(tree / 'roles' / 'serving' / 'tasks' / 'steps' / 'summary.yml'), 'a') as handle:
        handle.write('# {{ _sglang_constraints_file }}\n')
    result = lint(tree)
    assert result.returncode == 1
    assert 'roles/serving/tasks/steps/summary.yml' in result.stdout and 'private to role sglang:' in result.stdout


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


def test_a_module_utils_file_over_500_lines_fails_in_a_subpackage_too(tree_with_plugins):
    module_utils = tree_with_plugins / 'plugins' / 'module_utils'
    (module_utils / '_topology' / 'grown.py').write_text('# -*- coding: utf-8 -*-\n' + 'VALUE = 1\n' * 500)
    (module_utils / '_just_fits.py').write_text('VALUE = 1\n' * 500)
    result = lint(tree_with_plugins)
    assert result.returncode == 1
    assert 'plugins/module_utils/_topology/grown.py: 501 lines, more than 500' in result.stdout
    assert '_just_fits.py' not in result.stdout


def test_a_second_list_of_secret_names_fails(tree_with_plugins):
    report = tree_with_plugins / 'plugins' / 'module_utils' / '_report.py'
    append(report, "\n\nHIDDEN_OPTIONS = ('api_key', 'admin_api_key')\n")
    lock = tree_with_plugins / 'plugins' / 'action' / 'node_lock.py'
    append(lock, "\n\n_NEVER_LOGGED = ['HF_TOKEN', 'PATH']\n")
    merge = tree_with_plugins / 'plugins' / 'module_utils' / '_topology' / 'merge.py'
    append(merge, "\n\n_SECRET_WORDS = ('passphrase',)\n")
    result = lint(tree_with_plugins)
    assert result.returncode == 1
    assert ('plugins/module_utils/_report.py:%d lists the secret name(s) admin_api_key, api_key' % line_count(report)
            in result.stdout)
    assert 'plugins/action/node_lock.py:%d lists the secret name(s) HF_TOKEN' % line_count(lock) in result.stdout
    assert ('plugins/module_utils/_topology/merge.py:%d defines _SECRET_WORDS: secret names are defined once, in '
            'plugins/module_utils/_secrets.py' % line_count(merge) in result.stdout)


def test_code_that_uses_a_secret_without_listing_names_passes(tree_with_plugins):
    workers = tree_with_plugins / 'plugins' / 'module_utils' / '_sglang_router_workers.py'
    append(workers, "\n\ndef _body(api_key):\n    secret = {'api_key': api_key}\n    return secret\n")
    assert '_sglang_router_workers.py' not in lint(tree_with_plugins).stdout


def test_a_second_merge_of_the_server_arguments_fails(tree_with_plugins):
    # The template's merge before it read the server_port filter, and a Python copy of the layering.
    template = tree_with_plugins / 'roles' / 'monitoring' / 'templates' / 'prometheus.yml.j2'
    append(template, "{{ (hostvars[host]['sglang_server_args'] | default({}))"
                     " | combine(hostvars[host]['sglang_server_extra_args'] | default({})) }}\n")
    inputs = tree_with_plugins / 'plugins' / 'module_utils' / '_inputs.py'
    append(inputs, "\n\ndef _port(args, extra_args):\n    merged = dict(args)\n    merged.update(extra_args)\n"
                   "    return merged.get('port')\n")
    result = lint(tree_with_plugins)
    assert result.returncode == 1
    assert ('roles/monitoring/templates/prometheus.yml.j2:%d merges the server arguments itself'
            % line_count(template)) in result.stdout
    assert ('plugins/module_utils/_inputs.py:%d merges the server arguments itself: use _server_arguments.layers.'
            'merge_layers' % (line_count(inputs) - 1)) in result.stdout


ENTRY_POINTS = ('main, deploy, topology, benchmark, experiment, campaign, report, plan, sort, current, stage_weights,'
                ' hold_back, host_experiment, vm_restart')


def replace(path, old, new):
    """Replace the first ``old`` in the file, returning the number of the line it was on."""
    with open(str(path)) as handle:
        text = handle.read()
    assert old in text
    with open(str(path), 'w') as handle:
        handle.write(text.replace(old, new, 1))
    return text[:text.index(old)].count('\n') + 1


def test_a_playbook_or_a_scenario_that_runs_a_step_of_the_serving_role_fails(tree):
    line = replace(tree / 'playbooks' / 'benchmark.yml', 'tasks_from: benchmark', 'tasks_from: steps/lock')
    append(tree / 'molecule' / 'default' / 'converge.yml',
           '\n- name: Measure\n  hosts: gpu_nodes\n  tasks:\n    - name: Measure\n      ansible.builtin.include_role:\n'
           '        name: inferops.serving.serving\n        tasks_from: measure.yml\n')
    result = lint(tree)
    assert result.returncode == 1
    assert ('playbooks/benchmark.yml:%d runs inferops.serving.serving with tasks_from: steps/lock, which is not one of'
            ' its entry points (%s): name an entry point; tasks/steps/ holds its internal steps' % (line, ENTRY_POINTS)
            in result.stdout)
    assert ('molecule/default/converge.yml:%d runs inferops.serving.serving with tasks_from: measure.yml'
            % line_count(tree / 'molecule' / 'default' / 'converge.yml') in result.stdout)


def test_another_role_or_a_test_that_runs_a_step_of_the_serving_role_fails(tree):
    tasks = tree / 'roles' / 'monitoring' / 'tasks' / 'main.yml'
    append(tasks, '\n- name: Lock\n  ansible.builtin.import_tasks: ../../serving/tasks/steps/lock.yml\n')
    (tree / 'tests' / 'unit').mkdir(parents=True)
    (tree / 'tests' / 'unit' / 'converge.yml').write_text(
        '- name: Converge\n  hosts: all\n  tasks:\n    - name: Converge\n      ansible.builtin.import_role:\n'
        '        name: inferops.serving.serving\n        tasks_from: steps/converge\n')
    (tree / 'tests' / 'unit' / 'test_drain.py').write_text(
        'PLAY = [{"hosts": "all", "tasks": [{"ansible.builtin.include_role": {\n'
        '    "name": "inferops.serving.serving", "tasks_from": "drain"}}]}]\n')
    result = lint(tree)
    assert result.returncode == 1
    assert ('roles/monitoring/tasks/main.yml:%d runs ../../serving/tasks/steps/lock.yml itself: import the role'
            ' inferops.serving.serving with tasks_from: <entry point>' % line_count(tasks) in result.stdout)
    assert 'tests/unit/converge.yml:7 runs inferops.serving.serving with tasks_from: steps/converge' in result.stdout
    assert 'tests/unit/test_drain.py:2 runs inferops.serving.serving with tasks_from: drain,' in result.stdout


def test_an_entry_point_named_with_its_file_name_passes(tree):
    replace(tree / 'playbooks' / 'report.yml', 'tasks_from: report', 'tasks_from: report.yml')
    # (The tree lacks the scenarios that read some variables: only the entry points count here.)
    assert 'tasks_from' not in lint(tree).stdout


def test_a_task_file_beside_the_entry_points_that_is_no_entry_point_fails(tree):
    tasks = tree / 'roles' / 'serving' / 'tasks'
    shutil.copy(str(tasks / 'steps' / 'summary.yml'), str(tasks / 'summary.yml'))
    result = lint(tree)
    assert result.returncode == 1
    assert ('roles/serving/tasks/summary.yml is not an entry point of meta/argument_specs.yml: document it there, or'
            ' move it to steps/ if the entry points run it' in result.stdout)


def test_includes_that_would_not_resolve_from_everywhere_fail(tree):
    steps = tree / 'roles' / 'serving' / 'tasks' / 'steps'
    drain = replace(steps / 'drain.yml', 'import_tasks: router_worker_urls.yml',
                    'import_tasks: steps/router_worker_urls.yml')
    step = replace(steps / 'campaign_step.yml', 'include_tasks: steps/trial.yml', 'include_tasks: trial.yml')
    report = replace(tree / 'roles' / 'serving' / 'tasks' / 'report.yml', 'import_tasks: steps/fetch_history.yml',
                     'import_tasks: fetch_history.yml')
    result = lint(tree)
    assert result.returncode == 1
    assert ("roles/serving/tasks/steps/drain.yml:%d: import_tasks steps/router_worker_urls.yml should name <file>.yml,"
            " a step beside it (a static import resolves from the importing file's folder)" % drain in result.stdout)
    assert ("roles/serving/tasks/steps/campaign_step.yml:%d: include_tasks trial.yml should name steps/<file>.yml (a"
            " dynamic include resolves from tasks/, then from the playbook's folder" % step in result.stdout)
    assert ('roles/serving/tasks/report.yml:%d: import_tasks fetch_history.yml should name steps/<file>.yml (a step)'
            ' or <entry point>.yml' % report in result.stdout)


def test_an_entry_point_lists_exactly_the_options_its_tasks_read(tree):
    specs = tree / 'roles' / 'serving' / 'meta' / 'argument_specs.yml'
    replace(specs, '<<: [*serving_history_options, *serving_baseline_age_options, *serving_reports_options,'
                   ' *serving_topology_options]',
            '<<: [*serving_history_options, *serving_reports_options, *serving_topology_options,'
            ' *serving_node_lock_options]')
    append(tree / 'roles' / 'serving' / 'tasks' / 'topology.yml',
           '\n# serving_deploy_record_path in a comment is not a read.\n- name: Say where the history is\n'
           '  ansible.builtin.debug:\n    msg: "{{ serving_history_path }}"\n')
    result = lint(tree)
    assert result.returncode == 1
    assert ('roles/serving: entry point report reads serving_max_baseline_age, which its options in'
            ' meta/argument_specs.yml lack' in result.stdout)
    assert 'roles/serving: entry point report lists option serving_node_lock_break, which none of its tasks reads' \
        in result.stdout
    assert 'entry point topology reads serving_history_path' in result.stdout
    assert 'serving_deploy_record_path' not in result.stdout


def merge_problem(path, line):
    return '%s:%d merges the server arguments itself: use _server_arguments.layers.merge_layers' % (path, line)


@pytest.mark.parametrize('planted', [
    "merged = {**args, **extra_args}",
    "merged = dict(args, **extra_args)",
    "merged = args | extra_args",
    "merged = ChainMap(extra_args, args)",
    # Through an alias, and a layer read by its key.
    "extra = params['extra_args']\n    merged = {**args, **extra}",
    "layers = (args, params.get('extra_args'))\n    merged = {}\n    for layer in layers:\n        merged.update(layer)",
    "merged = dict(args)\n    for flag, value in extra_args.items():\n        merged[flag] = value",
    "merged = dict(args)\n    merged |= extra_args",
    # The node layer is a layer as well.
    "merged = {**extra, **node_args}",
])
def test_a_second_merge_of_the_server_arguments_in_python_fails(tree_with_plugins, planted):
    inputs = tree_with_plugins / 'plugins' / 'module_utils' / '_inputs.py'
    before = line_count(inputs)
    append(inputs, "\n\ndef _port(args, params, extra_args):\n    %s\n    return merged.get('port')\n" % planted)
    result = lint(tree_with_plugins)
    assert result.returncode == 1
    lines = [n for n in range(before + 1, line_count(inputs) + 1)
             if merge_problem('plugins/module_utils/_inputs.py', n) in result.stdout]
    assert lines, result.stdout
    assert problems(result) == [merge_problem('plugins/module_utils/_inputs.py', n) for n in lines]


def test_a_merge_outside_the_one_function_of_its_own_file_fails(tree_with_plugins):
    module = tree_with_plugins / 'plugins' / 'module_utils' / '_server_arguments' / 'layers.py'
    append(module, "\n\ndef port(args, extra_args):\n    return {**args, **extra_args}.get('port')\n")
    result = lint(tree_with_plugins)
    assert problems(result) == [merge_problem('plugins/module_utils/_server_arguments/layers.py', line_count(module))]


def test_reading_the_merge_from_its_function_passes(tree_with_plugins):
    inputs = tree_with_plugins / 'plugins' / 'module_utils' / '_inputs.py'
    append(inputs, "\n\ndef _where(args, extra_args):\n    merged = effective_arguments(args, extra_args)\n"
                   "    result = {'port': merged.get('port')}\n    result.update(host=merged.get('host'))\n"
                   "    return result\n")
    result = lint(tree_with_plugins)
    assert problems(result) == [] and result.returncode == 0, result.stdout


JINJA_MERGE = ('merges the server arguments itself: give each layer to the sglang_server role, read them with the'
               ' filters inferops.serving.server_port / tp_size')


@pytest.mark.parametrize('planted, offset', [
    # Split over two lines: the problem is on the line of the merge.
    ("{{ sglang_server_args | combine(\n     sglang_server_extra_args) }}\n", 0),
    ("{{ [sglang_server_args,\n    hostvars[host]['sglang_server_extra_args']] | combine }}\n", 1),
    # Through a Jinja alias.
    ("{% set extra = hostvars[host]['sglang_server_extra_args'] | default({}) %}\n"
     "{{ hostvars[host]['sglang_server_args'] | combine(extra) }}\n", 1),
    # Laying more over the extra layer is a merge too (a replica's node arguments once were).
    ("{{ sglang_server_extra_args | default({})\n   | combine({'node-rank': 1}) }}\n", 1),
    ("{{ sglang_server_node_args | combine(sglang_server_args) }}\n", 0),
])
def test_a_second_merge_of_the_server_arguments_in_jinja_fails(tree, planted, offset):
    template = tree / 'roles' / 'monitoring' / 'templates' / 'prometheus.yml.j2'
    before = line_count(template)
    append(template, planted)
    result = lint(tree)
    assert result.returncode == 1
    assert problems(result) == ['roles/monitoring/templates/prometheus.yml.j2:%d %s' % (before + 1 + offset, JINJA_MERGE)
                                + ' or sglang_server_deployment']


def test_a_merge_through_a_variable_set_from_the_extra_arguments_fails(tree):
    tasks = tree / 'roles' / 'monitoring' / 'tasks' / 'main.yml'
    append(tasks, '\n- name: Where the server listens\n  ansible.builtin.debug:\n'
                  '    msg: "{{ sglang_server_args | combine(__extra) }}"\n'
                  '  vars:\n    __extra: "{{ sglang_server_extra_args | default({}) }}"\n')
    result = lint(tree)
    assert result.returncode == 1
    assert problems(result) == ['roles/monitoring/tasks/main.yml:%d %s or sglang_server_deployment'
                                % (line_count(tasks) - 2, JINJA_MERGE)]


@pytest.mark.parametrize('planted, names', [
    ("_HIDDEN = {'api_key': True, 'admin_api_key': True}", 'admin_api_key, api_key'),
    ("_ENV_SHOWN = {'HF_TOKEN': '(hidden)', 'PATH': None}", 'HF_TOKEN'),
    ("_HIDDEN = dict(api_key=1)", 'api_key'),
    ("_HIDDEN = frozenset(['API-KEY', 'Admin_Api_Key'])", 'API-KEY, Admin_Api_Key'),
    ("_HIDDEN = 'api_key admin-api-key'.split()", 'admin-api-key, api_key'),
    ("_HIDDEN = 'HF_TOKEN'", 'HF_TOKEN'),
    ("_HIDDEN = ['hf_token', 'Hugging-Face-Hub-Token']", 'Hugging-Face-Hub-Token, hf_token'),
    ("_HIDDEN = ('sglang_router_admin_api_key'.upper(), 'SGLANG_ROUTER_ADMIN_API_KEY')", 'SGLANG_ROUTER_ADMIN_API_KEY'),
])
def test_a_second_definition_of_secret_names_fails_whatever_its_spelling(tree_with_plugins, planted, names):
    report = tree_with_plugins / 'plugins' / 'module_utils' / '_report.py'
    append(report, '\n\n%s\n' % planted)
    result = lint(tree_with_plugins)
    assert result.returncode == 1
    assert problems(result) == ['plugins/module_utils/_report.py:%d lists the secret name(s) %s: import the list from'
                                ' plugins/module_utils/_secrets.py instead' % (line_count(report), names)]


def test_a_role_variable_spelled_as_a_secret_environment_variable_passes(tree_with_plugins):
    # sglang_router_admin_api_key is the variable the user sets for SGLANG_ROUTER_ADMIN_API_KEY:
    # naming it says where the key comes from, not which names are secret.
    report = tree_with_plugins / 'plugins' / 'module_utils' / '_report.py'
    append(report, "\n\n_READ_FROM = ('sglang_router_admin_api_key',)\n")
    result = lint(tree_with_plugins)
    assert problems(result) == [] and result.returncode == 0, result.stdout
