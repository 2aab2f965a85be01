#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: history_info
short_description: Read the history of an SGLang node
version_added: 0.1.0
description:
  - Reads the JSON-lines history written by M(inferops.serving.history) and returns the
    newest records, the newest record of each event, and the newest benchmark of
    a given configuration.
  - A missing file is an empty history.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  path:
    description: History file.
    type: path
    default: /var/lib/sglang/history.jsonl
  fingerprint:
    description:
      - Fingerprint of a configuration, normally that of the latest deploy. RV(benchmark) is the
        newest benchmark that measured exactly this configuration.
      - Defaults to the fingerprint of the latest C(deploy) record.
    type: str
  max_age:
    description: Seconds after which a benchmark no longer counts as recent.
    type: int
    default: 86400
  workload:
    description:
      - The workload of the benchmark to compare with (for example mode, prompts, requests in flight,
        input and output lengths). RV(benchmark) is then one that ran exactly this workload; one
        that ran another, or does not say, is not returned.
      - Values are compared as text.
    type: dict
  last:
    description: How many of the newest records to return in RV(records).
    type: int
    default: 200
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
'''

EXAMPLES = r'''
- name: Find a recent benchmark of the deployed configuration
  inferops.serving.history_info:
    max_age: 3600
  register: __history

- name: Benchmark the running server when there is none
  inferops.serving.serving_benchmark:
    model: glm-5
  when: __history.benchmark is none
'''

RETURN = r'''
records:
  description: The newest records, oldest first (at most O(last)).
  returned: always
  type: list
  elements: dict
latest:
  description: The newest record of each event that occurred, by event name.
  returned: always
  type: dict
  sample: {"deploy": {"event": "deploy", "fingerprint": "3f1c...", "ts": "2026-02-19T13:53:43Z"}}
fingerprint:
  description: The fingerprint RV(benchmark) was looked up for (O(fingerprint) or that of the latest deploy), or null.
  returned: always
  type: str
benchmark:
  description: The newest benchmark of RV(fingerprint) younger than O(max_age) (and of O(workload), if given), or null.
  returned: always
  type: dict
total:
  description: Number of records in the file.
  returned: always
  type: int
  sample: 12
venvs_served:
  description:
    - The venvs the server ran from, one entry per deploy of the whole history (not only the last O(last)
      records), oldest first; what role C(inferops.serving.sglang)'s C(prune) keeps the most recent of.
  returned: always
  type: list
  elements: str
  sample: [/opt/sglang/venvs/sglang-0.5.9-cu128, /opt/sglang/venvs/sglang-0.5.23-cu130]
skipped_lines:
  description: Line numbers that did not parse and were ignored.
  returned: always
  type: list
  elements: int
  sample: []
'''

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._history import (
    EVENTS,
    HistoryError,
    latest,
    load,
    recent_benchmark,
    venvs_served,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default='/var/lib/sglang/history.jsonl'),
            fingerprint=dict(type='str'),
            max_age=dict(type='int', default=86400),
            workload=dict(type='dict'),
            last=dict(type='int', default=200),
        ),
        supports_check_mode=True,
    )
    try:
        records, skipped = load(module.params['path'])
        fingerprint = module.params['fingerprint'] or (latest(records, 'deploy') or {}).get('fingerprint')
        benchmark = None
        if fingerprint:
            benchmark = recent_benchmark(records, fingerprint, module.params['max_age'], time.time(),
                                         module.params['workload'])
    except HistoryError as exc:
        module.fail_json(msg=str(exc))
    if skipped:
        module.warn('%s: line(s) %s are not records (torn by a crash, or edited) and were skipped'
                    % (module.params['path'], ', '.join(str(n) for n in skipped)))
    newest = {}
    for event in EVENTS:
        record = latest(records, event)
        if record is not None:
            newest[event] = record
    keep = max(module.params['last'], 0)
    module.exit_json(changed=False, records=records[-keep:] if keep else [], latest=newest,
                     fingerprint=fingerprint, benchmark=benchmark, total=len(records), skipped_lines=skipped,
                     venvs_served=venvs_served(records))


if __name__ == '__main__':
    main()
