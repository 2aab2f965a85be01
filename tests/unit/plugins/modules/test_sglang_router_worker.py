# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The worker module against a stand-in of the router's API: what a restarted router needs is recorded."""
import json
import os
import stat
import threading
import time

from ansible_collections.inferops.serving.plugins.modules import sglang_router_worker

MODULE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'plugins', 'modules',
                      'sglang_router_worker.py')
WORKER = 'http://10.0.0.11:8000'


def join(run_module, router, members_file, **extra):
    return run_module(router_url=router.url, router_api_key=router.api_key, url=WORKER,
                      worker_api_key='worker-key-1', members_file=str(members_file), timeout=5, **extra)


def test_an_added_worker_is_recorded_root_only_with_its_key_and_a_second_run_changes_nothing(
        run_module, fake_router, tmp_path):
    members = tmp_path / 'workers.json'
    first = join(run_module, fake_router, members)
    assert first['changed'] and first['action'] == 'add'
    assert json.loads(members.read_text()) == {'workers': {WORKER: {'api_key': 'worker-key-1'}}}
    assert stat.S_IMODE(os.stat(members).st_mode) == 0o600
    assert 'worker-key-1' not in json.dumps(first)
    second = join(run_module, fake_router, members)
    assert not second['changed'] and second['action'] == 'none'


def test_a_worker_the_router_already_lists_is_recorded_once(run_module, fake_router, tmp_path):
    fake_router.workers.append({'id': 'w1', 'url': WORKER, 'is_healthy': True})
    members = tmp_path / 'workers.json'
    result = join(run_module, fake_router, members)
    assert result['changed'] and result['action'] == 'none'
    assert WORKER in json.loads(members.read_text())['workers']
    assert not join(run_module, fake_router, members)['changed']


def test_check_mode_writes_nothing_and_says_it_would_change(run_module, fake_router, tmp_path):
    members = tmp_path / 'workers.json'
    result = join(run_module, fake_router, members, _ansible_check_mode=True)
    assert result['changed'] and not members.exists() and fake_router.workers == []


def test_a_removed_worker_leaves_the_record(run_module, fake_router, tmp_path):
    members = tmp_path / 'workers.json'
    join(run_module, fake_router, members)
    result = join(run_module, fake_router, members, state='absent')
    assert result['changed'] and result['action'] == 'remove'
    assert json.loads(members.read_text()) == {'workers': {}}


def test_a_host_without_the_routers_folder_is_named(run_module, fake_router, tmp_path):
    result = join(run_module, fake_router, tmp_path / 'missing' / 'workers.json')
    assert result['failed'] and 'deploy the router (role sglang_router) here first' in result['msg']


# smg 1.13.0: the same module, a router that answers 409, refuses capitals and drains first.
def test_smg_gets_the_url_in_the_one_spelling_it_takes_and_a_rerun_changes_nothing(run_module, fake_smg, tmp_path):
    members = tmp_path / 'workers.json'
    first = run_module(router_url=fake_smg.url, router_api_key=fake_smg.api_key, url='HTTP://10.0.0.11:8000/',
                       worker_api_key='worker-key-1', members_file=str(members), timeout=5)
    assert first['changed'] and first['action'] == 'add', first
    assert fake_smg.requests == [('POST', '/workers', {'url': WORKER, 'api_key': 'worker-key-1'})]
    assert first['worker']['status'] == 'ready' and first['worker']['labels'] == {'served_model_name': 'm'}
    again = run_module(router_url=fake_smg.url, router_api_key=fake_smg.api_key, url=WORKER + '/',
                       worker_api_key='worker-key-1', members_file=str(members), timeout=5)
    assert not again['changed'] and again['action'] == 'none'
    assert len(fake_smg.requests) == 1


def test_smg_409_for_a_worker_it_is_adding_already_counts_as_asked(run_module, fake_smg):
    # Added by an earlier run (or the router's restore) and still not answering: smg answers 409.
    fake_smg.unreachable.add(WORKER)
    fake_smg.add(WORKER)
    result = run_module(router_url=fake_smg.url, router_api_key=fake_smg.api_key, url=WORKER, timeout=2)
    assert result['failed'] and 'does not list http://10.0.0.11:8000 as healthy 2 s after' in result['msg']
    assert 'answered 409' not in result['msg']
    no_wait = run_module(router_url=fake_smg.url, router_api_key=fake_smg.api_key, url=WORKER, wait=False)
    # The add was asked for before: nothing new, and the id from smg's message.
    assert not no_wait['changed'] and no_wait['action'] == 'none'
    assert no_wait['worker_id'] == '01a2331e-d20c-7292-88f5-87881ce043eb'


def test_smg_removal_waits_for_the_end_of_the_drain(run_module, fake_smg, tmp_path):
    members = tmp_path / 'workers.json'
    join(run_module, fake_smg, members)
    fake_smg.drain_polls = 3
    result = join(run_module, fake_smg, members, state='absent')
    assert result['changed'] and result['action'] == 'remove' and result['worker'] is None
    assert fake_smg.workers == [] and json.loads(members.read_text()) == {'workers': {}}


def test_smg_a_draining_worker_asked_back_is_added_once_it_is_gone(run_module, fake_smg, tmp_path):
    members = tmp_path / 'workers.json'
    join(run_module, fake_smg, members)
    fake_smg.drain_polls = 3
    fake_smg.remove(fake_smg.workers[0]['id'])
    result = join(run_module, fake_smg, members)
    assert result['changed'] and result['action'] == 'add' and result['worker']['status'] == 'ready'
    posts = [r for r in fake_smg.requests if r[0] == 'POST']
    assert len(posts) == 2 and len(fake_smg.workers) == 1


def test_smg_a_key_it_refuses_names_the_admin_key(run_module, fake_smg):
    result = run_module(router_url=fake_smg.url, router_api_key='router-client-key', url=WORKER, timeout=2)
    assert result['failed'] and 'sglang_router_admin_api_key' in result['msg']


class _Module(object):
    check_mode = False

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs['msg'])


def test_nodes_that_join_at_once_are_all_recorded(tmp_path, monkeypatch):
    # Each join reads the file, adds its URL and writes it back. Slowed between the read and the
    # write, joins without the lock would write over each other's entries.
    members = tmp_path / 'workers.json'
    members_after = sglang_router_worker.members_after

    def slow_members_after(*args, **kwargs):
        time.sleep(0.05)
        return members_after(*args, **kwargs)

    monkeypatch.setattr(sglang_router_worker, 'members_after', slow_members_after)
    urls = ['http://10.0.0.%d:8000' % n for n in range(1, 9)]
    threads = [threading.Thread(target=sglang_router_worker._record_members,
                                args=(_Module(), str(members), url, 'present', None)) for url in urls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(json.loads(members.read_text())['workers']) == sorted(urls)


def test_a_join_waits_until_the_router_is_ready(run_module, fake_router, tmp_path):
    fake_router.not_ready_polls = 2
    result = join(run_module, fake_router, tmp_path / 'workers.json')
    assert result['changed'] and result['action'] == 'add'
    assert fake_router.readiness_polls == 3
    # A worker already routed is checked the same way; a removal and check mode do not ask.
    assert not join(run_module, fake_router, tmp_path / 'workers.json')['changed']
    assert fake_router.readiness_polls == 4
    join(run_module, fake_router, tmp_path / 'workers.json', _ansible_check_mode=True)
    join(run_module, fake_router, tmp_path / 'workers.json', state='absent')
    assert fake_router.readiness_polls == 4


class _Router(sglang_router_worker._Router):
    def __init__(self, base):
        self.module, self.base, self.timeout = _Module(), base, 2


def test_a_router_that_never_gets_ready_fails_the_join_saying_what_it_answers(fake_router, monkeypatch):
    monkeypatch.setattr(sglang_router_worker, 'READY_AFTER_HEALTHY_S', 1)
    fake_router.workers.append(fake_router.entry(WORKER))
    fake_router.not_ready_polls = 1000
    try:
        _Router(fake_router.url).wait_until_ready(time.time())
    except AssertionError as failure:
        assert 'lists the worker healthy, but its /readiness still answers 503' in str(failure)
        assert 'insufficient healthy workers' in str(failure)
    else:
        raise AssertionError('a router that is never ready must fail the join')
    assert fake_router.readiness_polls >= 2
