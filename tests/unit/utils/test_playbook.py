# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PlaybookRun reads real ansible-playbook runs through the JSON callback, on every ansible-core the
unit tests run on (make unit, make core-matrix): the recap per host, results by task name, the
failure messages, and the last playbook among other commands' output."""

import json
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import (
    ANSIBLE_PLAYBOOK, CLOSING_TASK, PlaybookRun, checkout_environment, run_playbook)

# Two hosts on this machine; `second` fails one item of a loop, after which it runs nothing more
# (the role's task last among them).
PLAY = [{
    'name': 'Two hosts, one failing', 'hosts': 'all', 'gather_facts': False,
    'tasks': [
        {'name': 'Say where it runs', 'ansible.builtin.debug': {'msg': 'runs on {{ inventory_hostname }}'}},
        {'name': 'Change something', 'ansible.builtin.command': 'true', 'changed_when': True},
        {'name': 'Check each item', 'ansible.builtin.assert': {
            'that': ["inventory_hostname == 'first' or item != 'b'"],
            'fail_msg': 'item {{ item }} is refused on {{ inventory_hostname }}:\n  a long message folded',
            'quiet': True},
         'loop': ['a', 'b']},
        {'name': 'Skip on first', 'ansible.builtin.debug': {'msg': 'only on second'},
         'when': "inventory_hostname == 'second'"},
        {'name': 'Greet from a role', 'ansible.builtin.import_role': {'name': 'greeter'}},
    ]}]
GREETER_TASKS = [{'name': 'Say hello', 'ansible.builtin.debug': {'msg': 'hello'}}]


@pytest.fixture(scope='module')
def playbook(tmp_path_factory):
    folder = tmp_path_factory.mktemp('playbook')
    (folder / 'roles' / 'greeter' / 'tasks').mkdir(parents=True)
    (folder / 'roles' / 'greeter' / 'tasks' / 'main.yml').write_text(json.dumps(GREETER_TASKS))
    path = folder / 'play.yml'
    path.write_text(json.dumps(PLAY))
    return str(path)


def arguments(playbook):
    return ['-i', 'first,second,', '-c', 'local', '-e', 'ansible_python_interpreter=' + sys.executable, playbook]


@pytest.fixture(scope='module')
def result(playbook):
    return run_playbook(arguments(playbook))


def test_the_recap_counts_each_host(result):
    assert result.returncode == 2, result.summary
    first, second = result.recap['first'], result.recap['second']
    assert (first.ok, first.changed, first.failed, first.skipped, first.unreachable) == (4, 1, 0, 1, 0), result.summary
    assert (second.ok, second.changed, second.failed, second.skipped, second.unreachable) == (2, 1, 1, 0, 0), result.summary


def test_a_task_result_is_found_by_its_name(result):
    assert result.tasks('first')['Say where it runs']['msg'] == 'runs on first'
    assert result.tasks('second')['Change something']['changed'] is True
    assert 'Skip on first' not in result.tasks('second'), 'second stopped at its failure'


def test_the_tasks_reached_are_named_in_order_without_their_role(result):
    assert ('first', 'greeter : Say hello') in [(host, name) for host, name, _result in result.results]
    assert result.task_names('first') == ['Say where it runs', 'Change something', 'Check each item',
                                          'Skip on first', 'Say hello'], result.summary
    assert result.task_names('second') == ['Say where it runs', 'Change something', 'Check each item']
    assert result.task_names().count('Change something') == 2


def test_the_failure_messages_name_the_failed_item_only(result):
    assert result.failures('first') == []
    assert result.failures('second') == ['item b is refused on second:\n  a long message folded'], result.summary
    assert result.said('refused on second: a long message folded')
    assert not result.said('item a is refused')


def test_the_last_playbook_is_read_among_other_commands_output(playbook):
    command = ' '.join([ANSIBLE_PLAYBOOK] + arguments(playbook) + ['--limit', 'first'])
    script = 'echo before; %s; echo between; %s --limit second || echo "after: $?"' % (command, command)
    proc = subprocess.run(['bash', '-c', script], env=checkout_environment(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    run = PlaybookRun(proc.returncode, proc.stdout)
    assert len(run.documents) == 2, run.summary
    assert list(run.recap) == ['second'], run.summary
    assert run.failures() == ['item b is refused on second:\n  a long message folded'], run.summary
    assert 'before' in run.text and 'between' in run.text and 'after: 2' in run.text


def test_a_playbook_ansible_cannot_load_leaves_its_error_and_no_recap(tmp_path):
    broken = tmp_path / 'broken.yml'
    broken.write_text('- hosts: all\n  tasks:\n    - ansible.builtin.debug: {msg: [unclosed\n')
    run = run_playbook(['-i', 'first,', '-c', 'local', str(broken)])
    assert run.returncode != 0
    assert run.recap == {} and run.results == []
    assert 'broken.yml' in run.text, run.summary


def _ended_with(name, msg):
    """A run whose last task is NAME saying MSG, as the JSON callback prints it."""
    document = {'plays': [{'play': {'name': 'Deploy'}, 'tasks': [
        {'task': {'name': 'inferops.serving.serving : Release the node lock'}, 'hosts': {'node': {'changed': True}}},
        {'task': {'name': 'inferops.serving.serving : ' + name}, 'hosts': {'node': {'failed': True, 'msg': msg}}}]}],
        'stats': {'node': {'ok': 1, 'changed': 1, 'unreachable': 0, 'failures': 1, 'skipped': 0, 'rescued': 0,
                           'ignored': 0}}}
    return PlaybookRun(2, json.dumps(document))


def test_the_closing_message_is_the_last_tasks_and_must_be_the_closing_task():
    run = _ended_with(CLOSING_TASK, 'Deploy refused on node:\n  What to change: nothing.')
    assert run.closing_message() == 'Deploy refused on node: What to change: nothing.'
    with pytest.raises(AssertionError):
        _ended_with('Restart the server', 'restarted').closing_message()


def test_each_task_is_timed_under_its_name_without_its_role(result):
    seconds = result.task_seconds()
    assert list(seconds)[:3] == ['Say where it runs', 'Change something', 'Check each item'], seconds
    assert 'Say hello' in seconds and all(value >= 0 for value in seconds.values()), seconds
    assert seconds['Change something'] > 0, seconds


def test_results_are_found_by_the_start_of_their_name_without_the_role(result):
    assert [item['msg'] for item in result.results_named('Say hello')] == ['hello']
    assert len(result.results_named('Say')) == 3  # where it runs on both hosts, then hello on first
    assert [item.get('skipped') for item in result.results_named('Skip on', 'first')] == [True]
    assert result.results_named('greeter : Say hello') == []
