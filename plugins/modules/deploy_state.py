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
  - The action plugin of the same name computes O(fingerprint) when it is not given, from every
    documented variable of the roles gpu_vm, sglang and sglang_server as it resolves for the node
    (role defaults below the node's variables), and the collection's own code.
  - Read-only in O(state=query), so it runs in check mode; O(state=present) and O(state=absent)
    report in check mode what they would change.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  state:
    description: V(query) plans, V(present) records, V(absent) forgets.
    type: str
    choices: [query, present, absent]
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
  files:
    description: Files whose checksums the record keeps (V(present)).
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
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._deploy_state import (
    DeployStateError,
    new_record,
    observe,
    parse_record,
    plan_state,
    record_spec,
    record_text,
)
from ansible_collections.inferops.serving.plugins.module_utils._node_lock import write_atomically


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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['query', 'present', 'absent'], default='query'),
            path=dict(type='path', default='/var/lib/inferops-serving/deployed.json'),
            history=dict(type='path', default='/var/lib/sglang/history.jsonl'),
            fingerprint=dict(type='str'),
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
                  venv=(record or {}).get('venv'))

    if params['state'] == 'query':
        observed = observe(record_spec(record), _read_text, _service_state(module)) if record else None
        result['plan'], result['reasons'] = plan_state(record, params['fingerprint'], observed,
                                                       os.path.exists(params['history']))
        module.exit_json(**result)

    if params['state'] == 'absent':
        if text is not None and (record is None or record.get('fingerprint') != params['fingerprint']):
            result['changed'] = True
            if not module.check_mode:
                os.unlink(path)
        module.exit_json(**result)

    spec = dict((key, params[key]) for key in ('files', 'packages', 'venv', 'distributions', 'service'))
    wanted = record_text(new_record(params['fingerprint'], spec, observe(spec, _read_text, _service_state(module))))
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
