#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: history
short_description: Append a deploy, benchmark or experiment outcome to the node's history
version_added: 0.1.0
description:
  - Appends one JSON object as a line to the history file of an SGLang node
    (C(/var/lib/sglang/history.jsonl) by default). Lines are never rewritten.
  - "Each record carries C(ts) (UTC, ISO 8601), C(epoch), C(event), C(node) and the given O(fields)."
  - With O(once_per_fingerprint=true) a record is skipped when the newest record of the
    same event carries the same C(fingerprint), so that a redeploy that changes nothing does
    not grow the history and reports C(changed=false).
  - In check mode nothing is written; C(changed) tells whether a line would be appended.
  - Crash-safe. The module holds an exclusive C(flock) on the file while it reads and appends, so two
    runs never interleave. A last line without its newline (a write cut short) is ended before the
    next record with a warning; a whole record is kept as it is, a torn fragment stays as a line that
    readers skip and report. No complete record is ever lost or rewritten.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  path:
    description: History file.
    type: path
    default: /var/lib/sglang/history.jsonl
  event:
    description: What happened.
    type: str
    required: true
    choices: [deploy, benchmark, experiment, rollback, campaign]
  node:
    description: Name of the node in the record, normally C(inventory_hostname).
    type: str
    required: true
  fields:
    description:
      - Further keys of the record, for example C(experiment), C(fingerprint), C(metrics), C(decision).
      - May not set C(ts), C(epoch), C(event) or C(node). Never put secrets here.
    type: dict
    default: {}
  once_per_fingerprint:
    description: Append only when the newest record of O(event) has another C(fingerprint) field.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.files
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
'''

EXAMPLES = r'''
- name: Record the deployed configuration once per change
  inferops.serving.history:
    event: deploy
    node: "{{ inventory_hostname }}"
    once_per_fingerprint: true
    fields:
      fingerprint: "{{ __stack_fingerprint }}"
    owner: sglang
    group: sglang
    mode: "0640"

- name: Record a benchmark
  inferops.serving.history:
    event: benchmark
    node: "{{ inventory_hostname }}"
    fields:
      experiment: null
      fingerprint: "{{ __stack_fingerprint }}"
      metrics: "{{ __bench.benchmark }}"
'''

RETURN = r'''
record:
  description: The record appended, or that would have been appended (also when skipped as a repeat).
  returned: always
  type: dict
  sample: {"ts": "2026-02-19T13:53:43Z", "epoch": 1771509223.0, "event": "deploy", "node": "gpu-node",
           "fingerprint": "3f1c..."}
appended:
  description: Whether a line was (or in check mode would be) appended.
  returned: always
  type: bool
  sample: true
skipped_lines:
  description: Line numbers of the existing file that did not parse and were ignored (readers skip them).
  returned: always
  type: list
  elements: int
  sample: []
'''

import fcntl
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.inferops.serving.plugins.module_utils._history import (
    EVENTS,
    HistoryError,
    is_repeat,
    make_record,
    parse_history,
    serialize,
    torn_tail,
    torn_tail_warning,
)


def _read_all(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b''.join(chunks)
        chunks.append(chunk)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default='/var/lib/sglang/history.jsonl'),
            event=dict(type='str', required=True, choices=list(EVENTS)),
            node=dict(type='str', required=True),
            fields=dict(type='dict', default={}),
            once_per_fingerprint=dict(type='bool', default=False),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    path = module.params['path']
    if not os.path.isdir(os.path.dirname(path) or '.'):
        if module.check_mode:
            # A first deploy in check mode: the folder would exist by now.
            module.exit_json(changed=True, appended=True, skipped_lines=[],
                             record={'event': module.params['event'], 'node': module.params['node']})
        module.fail_json(msg='the folder of %s does not exist; deploy the node first (gpu_vm creates it)' % path)
    try:
        record = make_record(module.params['event'], module.params['node'], module.params['fields'], time.time())
    except HistoryError as exc:
        module.fail_json(msg='cannot record %s in %s: %s' % (module.params['event'], path, exc))

    if module.check_mode and not os.path.exists(path):
        fd = None
    else:
        try:
            fd = os.open(path, os.O_RDONLY if module.check_mode else os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
        except OSError as exc:
            module.fail_json(msg='cannot open %s: %s' % (path, exc))
    try:
        data = b''
        if fd is not None:
            # One writer at a time, also across runs: a second run (or a module left running on the
            # node after its ansible-playbook was killed) waits here instead of interleaving.
            fcntl.flock(fd, fcntl.LOCK_SH if module.check_mode else fcntl.LOCK_EX)
            data = _read_all(fd)
        records, skipped = parse_history(data.decode('utf-8', 'replace'))
        tail = torn_tail(data)
        append = not (module.params['once_per_fingerprint'] and is_repeat(records, record))
        changed = append
        if tail is not None:
            module.warn(torn_tail_warning(path, tail))
            changed = True
        if not module.check_mode and (append or tail is not None):
            # The torn line is ended first, in the same write as the record: never glued, never lost.
            payload = (b'\n' if tail is not None else b'') + (to_bytes(serialize(record)) if append else b'')
            while payload:
                payload = payload[os.write(fd, payload):]
            os.fsync(fd)
    finally:
        if fd is not None:
            os.close(fd)
    if os.path.exists(path):
        file_args = module.load_file_common_arguments(module.params)
        changed = module.set_fs_attributes_if_different(file_args, changed)
    module.exit_json(changed=changed, appended=append, record=record, skipped_lines=skipped)


if __name__ == '__main__':
    main()
