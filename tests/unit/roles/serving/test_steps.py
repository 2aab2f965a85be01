# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A file of roles/serving/tasks/steps/ run on its own stops before any of its tasks.

Runs a playbook that imports (or includes) the role with ``tasks_from: steps/<file>`` against this
machine (connection local, check mode). The step's first task refuses, naming the entry points; a
step that imports another step stops earlier still, when the play is read. The same role through
an entry point gets past every step's check.
"""
import json
import os
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
SPECS = os.path.join(REPO_ROOT, 'roles', 'serving', 'meta', 'argument_specs.yml')
STEPS = os.path.join(REPO_ROOT, 'roles', 'serving', 'tasks', 'steps')

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK),
                                reason='needs ansible-playbook next to the test interpreter')

REFUSAL = 'is an internal step of its entry points and runs only from one of them'


def entry_points():
    with open(SPECS) as handle:
        return [name for name in yaml.safe_load(handle)['argument_specs'] if name != 'main']


def run(tmp_path, tasks_from, how='import'):
    playbook = tmp_path / 'playbook.yml'
    playbook.write_text(json.dumps([{
        'hosts': 'all', 'gather_facts': False,
        'tasks': [{'name': 'The role', 'ansible.builtin.%s_role' % how: {
            'name': 'inferops.serving.serving', 'tasks_from': tasks_from}}]}]))
    extra = dict(ansible_python_interpreter=sys.executable, ansible_become=False,
                 serving_history_path=str(tmp_path / 'history.jsonl'),
                 serving_reports_dir=str(tmp_path / 'reports'))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO_ROOT, '.collections'))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, '-i', 'testhost,', '-c', 'local', '--check', str(playbook),
                           '-e', json.dumps(extra)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def steps():
    return sorted(name[:-len('.yml')] for name in os.listdir(STEPS))


def imports_a_step(step):
    """Whether the step imports another statically: such an import names the file alone, which
    resolves from the folder of the step that imports it, not from a playbook's."""
    def found(tasks):
        return any('ansible.builtin.import_tasks' in task or any(found(task.get(key)) for key in ('block', 'rescue', 'always'))
                   for task in tasks or [])
    with open(os.path.join(STEPS, step + '.yml')) as handle:
        return found(yaml.safe_load(handle))


@pytest.mark.parametrize('step', steps())
def test_a_step_run_alone_stops_before_any_of_its_tasks(tmp_path, step):
    rc, output = run(tmp_path, 'steps/' + step)
    assert rc != 0
    if imports_a_step(step):
        # Stopped while the play was read, before any task.
        assert 'Could not find or access' in output, output[-3000:]
        assert 'TASK [' not in output, output[-3000:]
    else:
        assert REFUSAL in output, output[-3000:]
        assert 'with tasks_from: %s (ansible-doc' % ', '.join(entry_points()) in output, output[-3000:]
        assert 'roles/serving/tasks/steps/%s.yml' % step in output, output[-3000:]
        # The check was the only task that ran.
        assert output.count('TASK [') == 1, output[-3000:]


@pytest.mark.parametrize('tasks_from', ['steps/lock.yml', 'steps/measure'])
def test_a_step_included_alone_stops_at_its_check(tmp_path, tasks_from):
    rc, output = run(tmp_path, tasks_from, 'include')
    assert rc != 0
    assert REFUSAL in output, output[-3000:]
    # The include and the check.
    assert output.count('TASK [') == 2, output[-3000:]


@pytest.mark.parametrize('how', ['import', 'include'])
def test_an_entry_point_gets_past_the_checks_of_its_steps(tmp_path, how):
    rc, output = run(tmp_path, 'benchmark', how)
    # Past the checks of steps/settings.yml and steps/running.yml, it stops at the node's missing history.
    assert rc != 0
    assert 'testhost has no deploy in' in output, output[-3000:]
    assert REFUSAL not in output
