#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_drain
short_description: Wait until an SGLang server out of its router has finished the requests it holds
version_added: 0.4.0
description:
  - Run on the node after it left the router (M(inferops.serving.sglang_router_worker) with V(state=absent)),
    before its server restarts, so that the restart fails none of the requests it still holds.
  - Reads the server's C(/health) first; a server that does not answer 200 holds no request a drain could save,
    and the module returns at once with RV(drained=true).
  - Then reads the server's C(/metrics) every O(interval) seconds until the gauges C(sglang:num_running_reqs) and
    C(sglang:num_queue_reqs) are both 0 (summed over their label sets; the per-priority shares that SGLang 0.5.23
    writes under C(--enable-priority-scheduling) are left out), or O(timeout) seconds have passed, however long
    each read takes.
  - Does not fail when the requests outlive the bound; RV(drained) and RV(left) say so, and the caller decides.
    A server whose C(/metrics) has no C(sglang:num_running_reqs) gauge (SGLang started without C(--enable-metrics))
    ends the drain at once, RV(left) saying what to set.
  - Changes nothing.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  url:
    description: Where the server answers, e.g. C(http://127.0.0.1:8000).
    type: str
    required: true
  api_key:
    description: The server's API key, sent as a bearer token with the C(/metrics) reads.
    type: str
  timeout:
    description: Seconds the requests may take to finish (the bound a stop of the server gives them).
    type: int
    required: true
  interval:
    description: Seconds between two reads of C(/metrics).
    type: int
    default: 2
attributes:
  check_mode:
    description: Reads nothing and returns RV(drained=true) - in check mode the node was not taken out of its router.
    support: full
'''

EXAMPLES = r'''
- name: Wait until the requests the node holds have finished, at most 120 s
  inferops.serving.sglang_drain:
    url: http://127.0.0.1:8000
    api_key: "{{ sglang_server_api_key }}"
    timeout: 120
  register: drain

- name: Stop when requests outlived the bound
  ansible.builtin.fail:
    msg: "{{ inventory_hostname }} did not drain: {{ drain.left }}."
  when: not drain.drained
'''

RETURN = r'''
answered:
  description: Whether the server's C(/health) answered 200.
  returned: always
  type: bool
drained:
  description: Whether the server holds no request (or did not answer C(/health)).
  returned: always
  type: bool
in_flight:
  description: Requests the last read found, C(running) and C(queued); null when none was read.
  returned: always
  type: dict
reads:
  description: How many times C(/metrics) was read.
  returned: always
  type: int
left:
  description:
    - What a drain that did not end left, in words to follow "did not drain:" - requests still running and queued
      at the bound, else a C(/metrics) that did not answer, else gauges it does not have. Empty when drained.
  returned: always
  type: str
'''

import time
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.urls import open_url
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_workers import drain


def _reader(url, headers, timeout):
    def read():
        try:
            response = open_url(url, headers=headers, timeout=timeout, validate_certs=True)
            return response.getcode(), to_text(response.read(), errors='surrogate_or_replace'), None
        except HTTPError as exc:
            return exc.code, '', 'status %s' % exc.code
        except (URLError, OSError) as exc:
            return None, '', to_text(exc)
    return read


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            timeout=dict(type='int', required=True),
            interval=dict(type='int', default=2),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['timeout'] < 0 or params['interval'] < 1:
        module.fail_json(msg='timeout must be 0 or more and interval 1 or more; got timeout=%s, interval=%s'
                             % (params['timeout'], params['interval']))
    if module.check_mode:
        module.exit_json(changed=False, answered=False, drained=True, in_flight=None, reads=0, left='')
    base = params['url'].rstrip('/')
    headers = {'Authorization': 'Bearer %s' % params['api_key']} if params['api_key'] else {}
    read_timeout = max(1, min(10, params['timeout']))
    result = drain(_reader(base + '/health', {}, 10), _reader(base + '/metrics', headers, read_timeout),
                   params['timeout'], params['interval'], time.time, time.sleep)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
