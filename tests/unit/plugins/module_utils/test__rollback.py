# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._rollback import rollback_by_files

DEPLOY = {'ts': '2026-12-05T10:00:00Z', 'epoch': 1.0, 'event': 'deploy', 'node': 'gpu-node',
          'fingerprint': 'f' * 40, 'server': {'url': 'http://127.0.0.1:30000', 'ready_path': '/health'}}
UNIT_FILE = '/etc/systemd/system/sglang.service'


class Node(object):
    """Answers module runs as a node would, from one scripted result per module (a list: one per run)."""

    def __init__(self, **answers):
        self.answers = answers
        self.runs = []
        self.now = 0.0

    def run_module(self, name, args):
        self.runs.append((name, args))
        answer = self.answers[name.rsplit('.', 1)[1]]
        return answer.pop(0) if isinstance(answer, list) else answer

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def rollback(self, ready_timeout=5):
        return rollback_by_files(self.run_module, '/var/lib/deploy.json', 'sglang.service', 'http://127.0.0.1:30000/health',
                                 ready_timeout, '/var/lib/history.jsonl', 'gpu-node', DEPLOY,
                                 clock=self.clock, sleep=self.sleep)

    def modules(self):
        return [name.rsplit('.', 1)[1] for name, _args in self.runs]


def test_files_put_back_restart_wait_and_the_deploy_recorded_again():
    not_yet = [{'failed': True, 'status': -1}, {'status': 503, 'failed': True}]
    node = Node(deploy_state={'restored': True, 'files': [UNIT_FILE], 'changed': True},
                systemd_service={'changed': True}, uri=not_yet + [{'status': 200}], history={'changed': True})
    result = node.rollback()
    assert result == {'restored': True, 'files': [UNIT_FILE], 'reasons': [], 'changed': True}
    assert node.modules() == ['deploy_state', 'systemd_service', 'uri', 'uri', 'uri', 'history']
    assert node.runs[1][1] == {'name': 'sglang.service', 'state': 'restarted', 'daemon_reload': True}
    recorded = node.runs[-1][1]
    # The history stamps its own time, event and node: only the deploy's own fields are carried over.
    assert recorded['event'] == 'deploy' and recorded['once_per_fingerprint'] is True
    assert sorted(recorded['fields']) == ['fingerprint', 'server']


def test_nothing_changed_no_restart_but_still_waits_and_records():
    node = Node(deploy_state={'restored': True, 'files': [], 'changed': False}, uri={'status': 200},
                history={'changed': False})
    assert node.rollback()['restored'] is True
    assert node.modules() == ['deploy_state', 'uri', 'history']


def test_files_that_do_not_bring_the_node_back_say_why_and_touch_nothing_else():
    node = Node(deploy_state={'restored': False, 'reasons': ['the venv changed'], 'changed': False})
    assert node.rollback() == {'restored': False, 'files': [], 'reasons': ['the venv changed'], 'changed': False}
    assert node.modules() == ['deploy_state']


def test_a_server_that_never_answers_is_converged_after_the_timeout():
    node = Node(deploy_state={'restored': True, 'files': [UNIT_FILE], 'changed': True}, systemd_service={},
                uri={'status': 503, 'failed': True})
    result = node.rollback(ready_timeout=3)
    assert result['restored'] is False and result['files'] == []
    assert 'did not answer 200 within 3 s' in result['reasons'][0] and '503' in result['reasons'][0]
    assert node.modules().count('uri') == 4 and 'history' not in node.modules()


def test_a_failed_restart_or_record_is_converged_and_says_which_step():
    restart_fails = Node(deploy_state={'restored': True, 'files': [UNIT_FILE]},
                         systemd_service={'failed': True, 'msg': 'Unit sglang.service not found.'})
    assert restart_fails.rollback()['reasons'] == ['restarting sglang.service failed: Unit sglang.service not found.']
    record_fails = Node(deploy_state={'restored': True, 'files': []}, uri={'status': 200},
                        history={'failed': True, 'msg': 'Permission denied'})
    assert record_fails.rollback()['reasons'] == ['recording the deploy that runs again failed: Permission denied']
    # A message that is not text (a module's list of errors) is shortened as text.
    long_errors = Node(deploy_state={'restored': True, 'files': [UNIT_FILE]},
                       systemd_service={'failed': True, 'msg': ['x' * 400, 'y']})
    reason = long_errors.rollback()['reasons'][0]
    assert reason.startswith("restarting sglang.service failed: ['xxx") and len(reason) == len('restarting sglang.service failed: ') + 300
    unreadable = Node(deploy_state={'failed': True, 'msg': 'no snapshot'})
    assert unreadable.rollback() == {'restored': False, 'files': [], 'reasons': ['putting back the files failed: no snapshot'],
                                     'changed': False}
