# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stopped_by filter in a real rescue: what a run keeps of the task that stopped it holds no
part of the failed task's result but its name and message, however the task fails."""
import json
import os
import sys

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import ANSIBLE_PLAYBOOK, run_playbook

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK),
                                reason='needs ansible-playbook next to the test interpreter')

SECRET = 'sk-never-in-the-note-5d1e'
PLAYBOOK = """
- name: A run that a task stops
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Work that fails
      block:
        - name: Start the server with its key on the command line
          ansible.builtin.command:
            argv: [sh, -c, 'echo "%(secret)s" >&2; exit 3', launcher, --api-key, "%(secret)s"]
          no_log: false
      rescue:
        - name: Note what stopped the run
          ansible.builtin.set_fact:
            stopped: "{{ ansible_failed_result | inferops.serving.stopped_by(ansible_failed_task, 'the run failed') }}"

    - name: Show the note
      ansible.builtin.debug:
        msg: "NOTE {{ stopped | to_json }}"
""" % {'secret': SECRET}


def test_the_note_of_a_rescued_failure_holds_its_task_and_message_only(tmp_path):
    playbook = tmp_path / 'stopped.yml'
    playbook.write_text(PLAYBOOK)
    run = run_playbook(['-i', 'localhost,', '-e', json.dumps({'ansible_python_interpreter': sys.executable,
                                                              'ansible_connection': 'local'}), str(playbook)])
    assert run.returncode == 0, run.summary
    failed = run.tasks('localhost')['Start the server with its key on the command line']
    assert failed['failed'] and SECRET in json.dumps(failed)
    note = json.loads(run.tasks('localhost')['Show the note']['msg'][len('NOTE '):])
    # The failed task's own words (each ansible-core release has its own), nothing else of its result.
    assert note == {'task': 'Start the server with its key on the command line', 'msg': failed['msg'],
                    'arguments_refused': False}
    assert 'non-zero return code' in note['msg'] and SECRET not in json.dumps(note)
