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


def test_check_mode_only_reads(run_module, tmp_path):
    path = str(tmp_path / 'node.lock')
    result = run_module(path=path, holder=ALICE, _ansible_check_mode=True)
    assert result['acquired'] is True and not os.path.exists(path)


def test_without_the_action_plugin_it_says_so(run_module, tmp_path):
    result = run_module(path=str(tmp_path / 'node.lock'))
    assert result['failed'] and 'action plugin' in result['msg']
