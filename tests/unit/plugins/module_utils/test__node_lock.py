# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import multiprocessing
import time

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._node_lock import (
    NodeLockError,
    decide,
    held_flock,
    held_message,
    holder_is_gone,
    make_record,
    parse_record,
)

ALICE = {'controller': 'ops-1', 'user': 'alice', 'pid': 4242, 'started': '99', 'playbook': 'deploy.yml',
         'purpose': 'deploy'}
BOB = {'controller': 'ops-2', 'user': 'bob', 'pid': 777, 'started': '5', 'playbook': 'experiment.yml',
       'purpose': 'experiment'}


def test_free_lock_is_taken_and_names_its_holder():
    assert decide(None, ALICE, 'boot-1') == ('take', None)
    record = make_record(ALICE, 'boot-1', 1771509223.0)
    assert record['since'] == '2026-02-19T13:53:43Z'
    assert (record['controller'], record['user'], record['pid'], record['playbook']) == ('ops-1', 'alice', 4242,
                                                                                         'deploy.yml')


def test_the_same_run_keeps_it_and_another_run_finds_it_held():
    record = make_record(ALICE, 'boot-1', 1771509223.0)
    assert decide(record, dict(ALICE), 'boot-1') == ('keep', None)
    assert decide(record, BOB, 'boot-1') == ('held', None)
    # A new ansible-playbook on the same controller that reuses the pid is another run.
    assert decide(record, dict(ALICE, started='100'), 'boot-1') == ('held', None)


def test_a_reboot_ends_the_holder():
    action, reason = decide(make_record(ALICE, 'boot-1', 1771509223.0), BOB, 'boot-2')
    assert action == 'take' and 'rebooted' in reason


def test_a_lock_is_broken_only_for_the_run_that_was_found_gone():
    record = make_record(ALICE, 'boot-1', 1771509223.0)
    assert decide(record, BOB, 'boot-1', break_run_id=record['run_id'])[0] == 'take'
    assert decide(record, BOB, 'boot-1', break_run_id='ops-1:1:1')[0] == 'held'


def test_holder_gone_only_when_it_ran_on_this_controller():
    record = make_record(ALICE, 'boot-1', 1771509223.0)
    assert holder_is_gone(record, 'ops-1', lambda pid: False) is True
    assert holder_is_gone(record, 'ops-1', lambda pid: True) is False
    assert holder_is_gone(record, 'ops-2', lambda pid: False) is False


def test_the_message_says_who_since_when_and_what_to_do():
    message = held_message(make_record(ALICE, 'boot-1', 1771509223.0), '/var/lib/inferops-serving/node.lock', 0)
    assert 'alice@ops-1 (pid 4242, deploy.yml, deploy) since 2026-02-19T13:53:43Z' in message
    assert 'serving_node_lock_wait' in message and 'Nothing was changed' in message


@pytest.mark.parametrize('text', ['', '{"run', '[]', '{"run_id": ""}'])
def test_an_unreadable_record_counts_as_free(text):
    assert parse_record(text) is None


def _hold(args):
    directory, seconds = args
    with held_flock('t.lock', timeout=5, directory=directory):
        time.sleep(seconds)


def test_flock_waits_for_the_holder_then_gives_up_with_a_message(tmp_path):
    process = multiprocessing.get_context('fork').Process(target=_hold, args=((str(tmp_path), 2),))
    process.start()
    time.sleep(0.5)
    with pytest.raises(NodeLockError, match='another run is still editing files'):
        with held_flock('t.lock', timeout=0.3, directory=str(tmp_path)):
            pass
    started = time.time()
    with held_flock('t.lock', timeout=10, directory=str(tmp_path)):
        assert time.time() - started > 0.5
    process.join()
