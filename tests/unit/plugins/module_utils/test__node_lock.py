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
    mark_rebooting,
    parse_record,
    refreshed,
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


NOW = 1771509223.0


def _rebooting(bound=960):
    """The record of a run that took the lock in boot-1 and is about to reboot the node."""
    return mark_rebooting(make_record(ALICE, 'boot-1', NOW), NOW + 60, bound)


def test_a_run_that_reboots_the_node_keeps_its_lock_in_the_new_boot():
    record = _rebooting()
    assert decide(record, dict(ALICE), 'boot-2', now=NOW + 200) == ('refresh', None)
    carried = refreshed(record, 'boot-2')
    assert carried['boot_id'] == 'boot-2' and 'rebooting_until' not in carried
    assert carried['run_id'] == record['run_id'] and carried['since'] == record['since']
    # Taken into the new boot, it is an ordinary held lock again.
    assert decide(carried, dict(ALICE), 'boot-2', now=NOW + 201) == ('keep', None)
    assert decide(carried, BOB, 'boot-2', now=NOW + 201) == ('held', None)


def test_the_holder_refreshes_even_when_the_reboot_did_not_happen():
    # Marked, then the reboot was skipped or failed before the node went down: same boot, mark dropped.
    assert decide(_rebooting(), dict(ALICE), 'boot-1', now=NOW + 70) == ('refresh', None)


def test_another_run_finds_a_rebooting_lock_held_before_and_after_the_reboot():
    record = _rebooting()
    assert decide(record, BOB, 'boot-1', now=NOW + 61) == ('held', None)
    # The node is back in a new boot, its holder has not taken the lock again yet: still held.
    assert decide(record, BOB, 'boot-2', now=NOW + 300) == ('held', None)
    message = held_message(record, '/var/lib/inferops-serving/node.lock', 30)
    assert 'alice@ops-1 (pid 4242, deploy.yml, deploy)' in message
    assert 'rebooting the node (back by 2026-02-19T14:10:43Z)' in message


def test_a_rebooting_lock_past_its_bound_is_stale():
    record = _rebooting(bound=960)
    action, reason = decide(record, BOB, 'boot-2', now=NOW + 60 + 960)
    assert action == 'take'
    assert 'alice@ops-1' in reason and 'to be back by 2026-02-19T14:10:43Z' in reason
    # Past the bound, even in the boot it was marked in (the node never went down and its run died).
    assert decide(record, BOB, 'boot-1', now=NOW + 60 + 961)[0] == 'take'


def test_a_rebooting_lock_whose_run_is_found_gone_is_taken_over_at_once():
    record = _rebooting()
    action, reason = decide(record, BOB, 'boot-2', break_run_id=record['run_id'], now=NOW + 100)
    assert action == 'take' and 'no longer runs' in reason


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
