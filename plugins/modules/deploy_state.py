#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: deploy_state
short_description: Record what a healthy deploy left on a node, and plan the next deploy against it
version_added: 0.3.0
description:
  - With O(state=present), at the end of a converge whose server is healthy, records on the node
    the inputs fingerprint and what the converge left there - the checksum of every file in
    O(files), the version and hold of every Debian package in O(packages), the version of every
    distribution in O(distributions) in the venv O(venv), and O(service) - together with the boot
    id. A record that would not change is left alone.
  - With O(state=query), the plan of C(deploy.yml), answers in C(plan) whether a deploy with the
    inputs O(fingerprint) would change the node - V(new) (no record, no history at O(history)),
    V(changes) (with C(reasons)) or V(current) - by comparing the record with the node as it is
    now - every listed file's checksum, every package's version and hold, every distribution's
    version and the size of every file of its pip RECORD (files in the record's checksum list are
    checked by checksum instead), the service active, the same boot. It starts no interpreter and
    reads no more than those files.
  - With O(state=absent), at the start of a converge, removes the record unless it names
    O(fingerprint), so that a converge that fails half way leaves a node the next plan converges
    again.
  - With O(state=snapshot), before an experiment changes anything, copies every file the record lists
    (root only) beside it, with the record and the boot it is taken in, when the node is as its record
    says (C(snapshot) says whether it did, C(reasons) why not). A restart since the record does not stop
    it. With O(state=restore), when the experiment is rolled back, the node is still in the boot of the
    snapshot, and the packages and Python distributions are still those of the snapshot, puts back every
    file that differs from it and the record as it was (C(restored), C(files)); the caller restarts the
    server. Otherwise it changes nothing and says why (C(reasons)), and the caller converges the stack
    instead.
  - The action plugin of the same name computes O(fingerprint) when it is not given, from every
    documented variable of the roles gpu_vm, sglang and sglang_server as it resolves for the node
    (role defaults below the node's variables), and the collection's own code.
  - Read-only in O(state=query), so it runs in check mode; O(state=present) and O(state=absent)
    report in check mode what they would change.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  state:
    description: V(query) plans, V(present) records, V(absent) forgets, V(snapshot) and V(restore) keep and put back what an experiment changes.
    type: str
    choices: [query, present, absent, snapshot, restore]
    default: query
  path:
    description: The record on the node (root only, mode 0600).
    type: path
    default: /var/lib/inferops-serving/deployed.json
  history:
    description: The node's deploy history; a node without a record but with a history was deployed before.
    type: path
    default: /var/lib/sglang/history.jsonl
  fingerprint:
    description: The inputs fingerprint (filled in by the action plugin when not given).
    type: str
  layers:
    description:
      - Layer name to the fingerprint of that layer's own inputs (filled in by the action plugin when not
        given); V(present) records them, V(query) says which layers a converge may leave alone.
    type: dict
    default: {}
  files:
    description: Files whose checksums the record keeps (V(present)); a relative path is one inside the site-packages of O(venv).
    type: list
    elements: path
    default: []
  packages:
    description: Debian packages whose version and hold the record keeps (V(present)).
    type: list
    elements: str
    default: []
  venv:
    description: The venv of O(distributions) (V(present)).
    type: path
  distributions:
    description: Python distributions in O(venv) whose versions and RECORD the record keeps (V(present)).
    type: list
    elements: str
    default: []
  service:
    description: The systemd unit that must be active (V(present)).
    type: str
notes:
  - The record holds checksums and versions, never a variable's value.
'''

EXAMPLES = r'''
- name: Plan the node
  inferops.serving.deploy_state:
    state: query
  register: plan

- name: Record the healthy deploy
  inferops.serving.deploy_state:
    state: present
    files: [/etc/systemd/system/sglang.service, /etc/sglang/sglang.env]
    packages: [cuda-toolkit-12-8]
    venv: /opt/sglang/venv
    distributions: [sglang, flashinfer-python]
    service: sglang.service
'''

RETURN = r'''
plan:
  description: V(new), V(changes) or V(current) (O(state=query)).
  returned: always
  type: str
reasons:
  description: Why the node is not current, for a person to read.
  returned: always
  type: list
  elements: str
fingerprint:
  description: The inputs fingerprint this run computed.
  returned: always
  type: str
venv:
  description: The venv the record names (O(state=query)), or null.
  returned: always
  type: str
snapshot:
  description: Whether the files were kept (O(state=snapshot)).
  returned: always
  type: bool
same_layers:
  description:
    - With O(state=query), the layers (V(gpu_vm), V(sglang)) a converge may leave alone - the node is as its
      record says apart from its inputs, and these layers' own inputs, and those of the layers beneath them,
      are those of the last healthy converge.
  returned: always
  type: list
  elements: str
same_inputs:
  description:
    - With O(state=snapshot), whether the files were kept, the record names this run's inputs and the node
      has not restarted since. The node is then exactly as a healthy converge of these inputs left it, so an
      experiment can leave alone the layers its overlay does not touch; after a restart it converges every
      layer, as a deploy would.
  returned: always
  type: bool
restored:
  description: Whether the node is back to the snapshot by its files alone (O(state=restore)).
  returned: always
  type: bool
files:
  description: The files put back (O(state=restore)).
  returned: always
  type: list
  elements: str
'''

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._deploy_state import (
    DeployStateError,
    absolute_files,
    drift,
    changed_files,
    new_record,
    observe,
    parse_record,
    plan_state,
    record_spec,
    record_text,
    restore_blockers,
    same_layers,
    snapshot_blockers,
    stored_name,
)
from ansible_collections.inferops.serving.plugins.module_utils._node_lock import write_atomically

# Beside a snapshot's record: the boot it was taken in, which the restore finds the node still in.
SNAPSHOT_BOOT = 'boot_id'


def _read_text(path):
    try:
        with open(path, 'r', encoding='utf-8', errors='replace') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _service_state(module):
    def state(unit):
        rc, out, _err = module.run_command(['systemctl', 'show', unit, '--property=ActiveState', '--value'])
        return out.strip() if rc == 0 else None
    return state


def _copy(source, target, like):
    """Copy ``source`` to ``target`` atomically, with the mode and owner of ``like``."""
    folder = os.path.dirname(target)
    temporary = os.path.join(folder, '.%s.inferops-restore' % os.path.basename(target))
    shutil.copyfile(source, temporary)
    status = os.stat(like)
    os.chmod(temporary, status.st_mode & 0o7777)
    os.chown(temporary, status.st_uid, status.st_gid)
    os.rename(temporary, target)


def _snapshot(module, path, record, result):
    folder = os.path.join(os.path.dirname(path), 'before-trial')
    if record is None:
        result['reasons'] = ['no deploy record at %s: the rollback converges the stack' % path]
        return
    observed = observe(record_spec(record), _read_text, _service_state(module))
    reasons = snapshot_blockers(record, observed)
    if reasons:
        result['reasons'] = reasons
        return
    # After a restart the node is as recorded but not current (drift): the experiment converges
    # every layer in this boot, as a deploy would, and the record put back keeps its own boot.
    result.update(snapshot=True, changed=True, same_inputs=not drift(record, module.params['fingerprint'], observed))
    if module.check_mode:
        return
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, 'files'), 0o700)
    for name, checksum in (record.get('files') or {}).items():
        if checksum is not None:
            _copy(name, os.path.join(folder, 'files', stored_name(name)), name)
    write_atomically(os.path.join(folder, SNAPSHOT_BOOT), observed['boot_id'] + '\n', mode=0o600)
    write_atomically(os.path.join(folder, 'record.json'), record_text(record), mode=0o600)


def _restore(module, path, result):
    folder = os.path.join(os.path.dirname(path), 'before-trial')
    text = _read_text(os.path.join(folder, 'record.json'))
    if text is None:
        result['reasons'] = ['no snapshot in %s: the rollback converges the stack' % folder]
        return
    snapshot = parse_record(text, os.path.join(folder, 'record.json'))
    observed = observe(record_spec(snapshot), _read_text, _service_state(module))
    reasons = restore_blockers(snapshot, observed, (_read_text(os.path.join(folder, SNAPSHOT_BOOT)) or '').strip())
    if reasons:
        result['reasons'] = reasons
        return
    result.update(restored=True, files=changed_files(snapshot, observed))
    result['changed'] = bool(result['files']) or _read_text(path) != text
    if module.check_mode:
        return
    for name in result['files']:
        copy = os.path.join(folder, 'files', stored_name(name))
        if snapshot['files'][name] is None:
            if os.path.lexists(name):
                os.unlink(name)
        else:
            _copy(copy, name, copy)
    write_atomically(path, text, mode=0o600)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['query', 'present', 'absent', 'snapshot', 'restore'], default='query'),
            path=dict(type='path', default='/var/lib/inferops-serving/deployed.json'),
            history=dict(type='path', default='/var/lib/sglang/history.jsonl'),
            fingerprint=dict(type='str'),
            layers=dict(type='dict', default={}),
            files=dict(type='list', elements='path', default=[]),
            packages=dict(type='list', elements='str', default=[]),
            venv=dict(type='path'),
            distributions=dict(type='list', elements='str', default=[]),
            service=dict(type='str'),
        ),
        required_if=[('state', 'present', ['fingerprint'])],
        supports_check_mode=True,
    )
    params = module.params
    path = params['path']
    text = _read_text(path)
    try:
        record = parse_record(text, path) if text is not None else None
    except DeployStateError:
        if params['state'] == 'query':
            record = {'format': None}
        else:
            record = None
            text = ''
    result = dict(changed=False, fingerprint=params['fingerprint'], plan='changes', reasons=[],
                  venv=None, snapshot=False, same_inputs=False, same_layers=[], restored=False, files=[])
    # A venv that still has its interpreter: the plan checks the server arguments against it.
    if record and record.get('venv') and os.path.exists(os.path.join(record['venv'], 'bin', 'python')):
        result['venv'] = record['venv']
    try:
        if params['state'] == 'snapshot':
            _snapshot(module, path, record, result)
            module.exit_json(**result)
        if params['state'] == 'restore':
            _restore(module, path, result)
            module.exit_json(**result)
    except (IOError, OSError, DeployStateError) as exc:
        module.fail_json(msg='deploy_state %s: %s' % (params['state'], exc), **result)

    if params['state'] == 'query':
        observed = observe(record_spec(record), _read_text, _service_state(module)) if record else None
        result['plan'], result['reasons'] = plan_state(record, params['fingerprint'], observed,
                                                       os.path.exists(params['history']))
        if result['plan'] == 'changes':
            result['same_layers'] = same_layers(record, params['fingerprint'], params['layers'], observed)
        module.exit_json(**result)

    if params['state'] == 'absent':
        if text is not None and (record is None or record.get('fingerprint') != params['fingerprint']):
            result['changed'] = True
            if not module.check_mode:
                os.unlink(path)
        module.exit_json(**result)

    spec = dict((key, params[key]) for key in ('files', 'packages', 'venv', 'distributions', 'service'))
    spec['files'] = absolute_files(spec['files'], spec['venv'])
    wanted = record_text(new_record(params['fingerprint'], spec, observe(spec, _read_text, _service_state(module)),
                                    params['layers']))
    if wanted != text:
        result['changed'] = True
        if not module.check_mode:
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path), 0o755)
            write_atomically(path, wanted, mode=0o600)
    result['plan'] = 'current'
    module.exit_json(**result)


if __name__ == '__main__':
    main()
