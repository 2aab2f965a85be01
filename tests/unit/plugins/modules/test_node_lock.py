# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os

MODULE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'plugins', 'modules', 'node_lock.py')

ALICE = {'controller': 'ops-1', 'user': 'alice', 'pid': 4242, 'started': '99', 'playbook': 'deploy.yml'}
BOB = {'controller': 'ops-2', 'user': 'bob', 'pid': 777, 'started': '5', 'playbook': 'experiment.yml'}


def test_acquire_hold_release(run_module, tmp_path):
    path = str(tmp_path / 'lock' / 'node.lock')
    first = run_module(path=path, holder=ALICE, purpose='deploy')
    assert first['acquired'] is True and first['changed'] is False
    assert json.load(open(path))['user'] == 'alice'
    again = run_module(path=path, holder=ALICE)
    assert again['acquired'] is True
    other = run_module(path=path, holder=BOB)
    assert other['acquired'] is False and other['held_by']['user'] == 'alice'
    # Another run's release leaves the lock alone.
    assert run_module(path=path, holder=BOB, state='absent')['released'] is False
    assert os.path.exists(path)
    assert run_module(path=path, holder=ALICE, state='absent')['released'] is True
    assert not os.path.exists(path)


def test_force_takes_over_a_lock_whose_run_is_gone(run_module, tmp_path):
    path = str(tmp_path / 'node.lock')
    run_module(path=path, holder=ALICE)
    taken = run_module(path=path, holder=BOB, force=True)
    assert taken['acquired'] is True and 'took over' in taken['took_over']
    assert json.load(open(path))['user'] == 'bob'


def test_the_lock_marked_before_a_reboot_outlives_the_boot(run_module, tmp_path):
    path = str(tmp_path / 'node.lock')
    run_module(path=path, holder=ALICE, purpose='deploy')
    with open(path) as handle:
        before_reboot = json.load(handle)
    # What the node looks like after the reboot: the record from the previous boot.
    before_reboot['boot_id'] = 'a-boot-before-this-one'
    with open(path, 'w') as handle:
        json.dump(before_reboot, handle)
    marked = run_module(path=path, holder=ALICE, state='rebooting', reboot_bound=900)
    assert marked['marked'] is True and marked['record']['rebooting_until'] > 0
    other = run_module(path=path, holder=BOB)
    assert other['acquired'] is False and other['held_by']['user'] == 'alice'
    back = run_module(path=path, holder=ALICE)
    assert back['acquired'] is True and back['took_over'] is None
    with open(path) as handle:
        carried = json.load(handle)
    assert 'rebooting_until' not in carried and carried['boot_id'] != 'a-boot-before-this-one'
    assert carried['run_id'] == before_reboot['run_id']


def test_marking_without_a_lock_of_this_run_does_nothing(run_module, tmp_path):
    path = str(tmp_path / 'node.lock')
    assert run_module(path=path, holder=ALICE, state='rebooting')['marked'] is False
    assert not os.path.exists(path)
    run_module(path=path, holder=BOB)
    assert run_module(path=path, holder=ALICE, state='rebooting')['marked'] is False
    with open(path) as handle:
        assert 'rebooting_until' not in json.load(handle)


def test_check_mode_only_reads(run_module, tmp_path):
    path = str(tmp_path / 'node.lock')
    result = run_module(path=path, holder=ALICE, _ansible_check_mode=True)
    assert result['acquired'] is True and not os.path.exists(path)


def test_without_the_action_plugin_it_says_so(run_module, tmp_path):
    result = run_module(path=str(tmp_path / 'node.lock'))
    assert result['failed'] and 'action plugin' in result['msg']
