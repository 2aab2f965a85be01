# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The worker module against a stand-in of the router's API: what a restarted router needs is recorded."""
import json
import os
import stat

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
