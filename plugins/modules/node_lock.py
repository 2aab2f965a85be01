#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: node_lock
short_description: Let one playbook run at a time change a node
version_added: 0.2.0
description:
  - With O(state=present), writes a lock record on the node naming the run that holds it
    (controller host, user, C(ansible-playbook) process id, playbook, since when). Every play and
    batch of the same C(ansible-playbook) process holds it together; another run waits up to
    O(wait) seconds and then fails saying who holds the lock since when.
  - A lock left by a killed run is taken over when the node has rebooted since it was written, or
    when it names this controller and a process that no longer runs there; O(force=true) takes
    over any lock (after a run was killed on another controller).
  - With O(state=absent), removes the lock if this run holds it; a lock of another run is left alone.
  - With O(state=rebooting), a run that holds the lock and is about to reboot the node marks its
    record so that the lock outlives the boot. Another run finds it held (naming the run and that
    it reboots the node) until the run takes it again after the reboot with O(state=present), or
    until O(reboot_bound) seconds have passed (then the lock is stale). Without a lock of this run
    it does nothing.
  - The controller side (this module's action plugin) fills in the holder and does the waiting.
  - The lock leaves the node as it found it, so the module always reports C(changed=false).
    In check mode the lock is only read; a check run fails when another run holds it.
  - Node-side modules that edit files (M(inferops.serving.anchored_patch), M(inferops.serving.history))
    also hold an C(flock) while they work, so a run that takes over a stale lock waits for a module
    that its killed predecessor left running on the node.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  state:
    description: V(present) acquires (after this run's own reboot, takes its lock into the new boot),
      V(absent) releases, V(rebooting) marks this run's lock before it reboots the node.
    type: str
    choices: [present, absent, rebooting]
    default: present
  path:
    description: The lock record on the node.
    type: path
    default: /var/lib/inferops-serving/node.lock
  purpose:
    description: What the run does, shown to whoever finds the lock held (for example V(deploy)).
    type: str
    default: ''
  wait:
    description: Seconds to wait for a lock held by another run; V(0) fails at once.
    type: int
    default: 0
  poll:
    description: Seconds between two looks at a held lock while waiting.
    type: int
    default: 5
  reboot_bound:
    description: With O(state=rebooting), seconds within which this run takes its lock again after the
      reboot; past them another run treats the lock as stale.
    type: int
    default: 1800
  force:
    description: Take the lock over even when another run holds it (that run must be gone).
    type: bool
    default: false
  holder:
    description: Filled in by the action plugin (controller, user, pid, started, playbook); do not set it.
    type: dict
  break_run_id:
    description: Filled in by the action plugin to take over the lock of a run that no longer exists.
    type: str
attributes:
  check_mode:
    description: Reads the lock only.
    support: full
  action:
    description: Runs on the controller to name the holder and to wait.
    support: full
'''

EXAMPLES = r'''
- name: Lock the node against other runs
  inferops.serving.node_lock:
    purpose: deploy
    wait: "{{ serving_node_lock_wait | default(0) }}"

- name: Keep the lock across the reboot this run makes
  inferops.serving.node_lock:
    state: rebooting
    reboot_bound: 960
  register: lock_marked

- name: Reboot
  ansible.builtin.reboot:

- name: Take the lock into the new boot
  inferops.serving.node_lock:
  when: lock_marked.marked

- name: Release the node
  inferops.serving.node_lock:
    state: absent
'''

RETURN = r'''
acquired:
  description: Whether this run holds the lock now (O(state=present)).
  returned: always
  type: bool
  sample: true
record:
  description: The lock record of this run.
  returned: when acquired
  type: dict
  sample: {"controller": "ops-1", "user": "alice", "pid": 4242, "playbook": "deploy.yml",
           "since": "2026-02-19T13:53:43Z", "run_id": "ops-1:4242:1234"}
held_by:
  description: The record of the run that holds the lock, when it is not this one.
  returned: when held by another run
  type: dict
took_over:
  description: Why a stale lock was taken over, or null.
  returned: always
  type: str
released:
  description: Whether a lock of this run was removed (O(state=absent)).
  returned: always
  type: bool
marked:
  description: Whether this run's lock was marked to outlive the reboot (O(state=rebooting)).
  returned: always
  type: bool
waited:
  description: Seconds this run waited for another run's lock (0 when it found the node free).
  returned: always
  type: int
waited_for:
  description: The run this one waited for, as a person reads it, or null.
  returned: always
  type: str
'''

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._node_lock import (
    NodeLockError,
    decide,
    held_flock,
    make_record,
    mark_rebooting,
    parse_record,
    read_file,
    refreshed,
    run_id,
    write_atomically,
)


def _boot_id():
    try:
        with open('/proc/sys/kernel/random/boot_id') as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['present', 'absent', 'rebooting'], default='present'),
            path=dict(type='path', default='/var/lib/inferops-serving/node.lock'),
            purpose=dict(type='str', default=''),
            wait=dict(type='int', default=0),
            poll=dict(type='int', default=5),
            force=dict(type='bool', default=False),
            reboot_bound=dict(type='int', default=1800),
            holder=dict(type='dict'),
            break_run_id=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    holder = dict(params['holder'] or {})
    if not holder.get('controller'):
        module.fail_json(msg='node_lock needs its action plugin (call it as inferops.serving.node_lock)')
    holder['purpose'] = params['purpose']
    path = params['path']
    if params['reboot_bound'] < 1:
        module.fail_json(msg='node_lock: reboot_bound is seconds (a whole number, at least 1), got %s'
                         % params['reboot_bound'])
    result = dict(changed=False, acquired=False, released=False, marked=False, took_over=None)
    try:
        # The guard serialises the read-decide-write of concurrent runs on this node.
        with held_flock('inferops-serving-node-lock.guard', timeout=60):
            current = parse_record(read_file(path) or '')
            if params['state'] == 'absent':
                if current is not None and current.get('run_id') == run_id(holder) and not module.check_mode:
                    os.unlink(path)
                    result['released'] = True
                module.exit_json(**result)
            if params['state'] == 'rebooting':
                if current is not None and current.get('run_id') == run_id(holder):
                    record = mark_rebooting(current, time.time(), params['reboot_bound'])
                    if not module.check_mode:
                        write_atomically(path, json.dumps(record, sort_keys=True) + '\n')
                    result.update(marked=True, acquired=True, record=record)
                module.exit_json(**result)
            boot_id = _boot_id()
            break_run_id = params['break_run_id']
            if params['force'] and current is not None:
                break_run_id = current.get('run_id')
            action, reason = decide(current, holder, boot_id, break_run_id)
            if action == 'held':
                result['held_by'] = current
                module.exit_json(**result)
            if action == 'keep':
                record = current
            elif action == 'refresh':
                record = refreshed(current, boot_id)
            else:
                record = make_record(holder, boot_id, time.time())
            if action in ('take', 'refresh') and not module.check_mode:
                if not os.path.isdir(os.path.dirname(path)):
                    os.makedirs(os.path.dirname(path), 0o755)
                write_atomically(path, json.dumps(record, sort_keys=True) + '\n')
            if reason:
                module.warn(reason)
            result.update(acquired=True, record=record, took_over=reason)
    except (NodeLockError, OSError) as exc:
        module.fail_json(msg='cannot lock %s: %s' % (path, exc), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
