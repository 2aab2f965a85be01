#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_router_worker
short_description: Register a worker with an SGLang router, or remove it, through the router's HTTP API
version_added: 0.2.0
description:
  - Talks to the C(/workers) API of C(sglang-router) 0.3.2 or C(smg) 1.13.0 (C(GET /workers), C(POST /workers),
    C(DELETE /workers/{id}); the older C(/add_worker) and C(/remove_worker) are gone).
  - The router adds and removes workers in the background (it answers 202). With O(wait=true) the module waits
    until the router lists the worker as healthy and is ready (O(state=present)) or no longer lists it
    (O(state=absent)).
    C(smg) first lists a removed worker as C(draining) for some seconds; the module waits for its end, and adds
    a draining worker again only once it is gone.
  - C(smg) answers 409 when asked to add a URL it lists or is adding already; the module takes that as the worker
    being there, or on its way (V(action=none)), and waits as for any add.
  - A worker is identified by its URL, sent with a lower-case scheme and no trailing slash (smg refuses the one and
    would register a second worker for the other); the router's id for it is returned.
  - In check mode nothing is sent except C(GET /workers) and nothing is written; C(changed) says whether the worker
    would be added or removed, or the O(members_file) would change.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  router_url:
    description: Where the router's API answers, e.g. C(http://127.0.0.1:30000).
    type: str
    required: true
  router_api_key:
    description:
      - The key of the router's C(/workers) API, sent as a bearer token - its client key (C(--api-key)), or with
        C(smg) and control plane keys its admin key (C(sglang_router_admin_api_key)).
    type: str
  url:
    description: The worker's URL as the router reaches it, e.g. C(http://10.0.0.11:8000).
    type: str
    required: true
  worker_api_key:
    description:
      - The worker's own API key, given to the router with the add request; the router sends it to the worker.
        C(smg) sends it only with requests whose client sent no key of its own, and with its health checks.
      - Workers added at run time receive no key otherwise.
    type: str
  state:
    description: V(present) registers the worker, V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  wait:
    description:
      - Wait until the router lists the worker healthy (V(present)) or no longer lists it (V(absent)).
      - With V(present), then also until the router's C(/readiness) answers 200 (it has the healthy workers it
        needs to take requests), within O(timeout) or at least 60 seconds after the worker is listed healthy.
    type: bool
    default: true
  timeout:
    description: Seconds to wait with O(wait=true).
    type: int
    default: 120
  timeout_request:
    description: Seconds for each HTTP request to the router.
    type: int
    default: 10
  members_file:
    description:
      - File on the router's host that records the workers the router should have, with their keys (root only,
        0600). The router's unit adds them again whenever the router (re)starts, since a restarted router
        forgets the workers added through its API.
      - Updated after every successful add or remove; a worker the router already lists is recorded too.
      - Read and written under an C(flock) on C(/run/lock/inferops-serving-router-members.lock), so that nodes
        joining at once each keep their entry.
      - Not written when not set.
    type: path
attributes:
  check_mode:
    description: Reads the worker list only; reports what would change.
    support: full
'''

EXAMPLES = r'''
- name: Take the node out of the router before it restarts
  inferops.serving.sglang_router_worker:
    router_url: http://127.0.0.1:30000
    router_api_key: "{{ sglang_router_api_key }}"
    url: http://10.0.0.11:8000
    state: absent
  delegate_to: router-1
  no_log: true

- name: Put it back, and wait until the router routes to it
  inferops.serving.sglang_router_worker:
    router_url: http://127.0.0.1:30000
    router_api_key: "{{ sglang_router_api_key }}"
    url: http://10.0.0.11:8000
    worker_api_key: "{{ sglang_server_api_key }}"
    state: present
    timeout: 300
  delegate_to: router-1
'''

RETURN = r'''
worker:
  description:
    - The router's entry for the worker (C(id), C(url), C(model_id), C(is_healthy), C(load), C(status), C(labels))
      after the change; null when absent.
    - C(status) is smg's (C(ready), C(not_ready), C(draining)), null from sglang-router; C(labels) are smg's
      C(labels) or sglang-router's C(metadata).
  returned: always
  type: dict
worker_id:
  description: The router's id of the worker (a UUID), when it is or was listed.
  returned: always
  type: str
action:
  description: What was (or in check mode would be) done - V(add), V(remove) or V(none).
  returned: always
  type: str
workers:
  description: Every worker the router lists at the end, as URL -> healthy.
  returned: always
  type: dict
'''

import json
import os
import tempfile
import time
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.inferops.serving.plugins.module_utils._node_lock import NodeLockError, held_flock
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_workers import (
    SglangRouterWorkersError,
    add_answer,
    add_request,
    find_worker,
    is_draining,
    is_routed,
    members_after,
    parse_workers,
    plan,
)

READY_AFTER_HEALTHY_S = 60


class _Router:
    def __init__(self, module):
        self.module = module
        self.base = module.params['router_url'].rstrip('/')
        self.headers = {'Content-Type': 'application/json'}
        if module.params['router_api_key']:
            self.headers['Authorization'] = 'Bearer %s' % module.params['router_api_key']
        self.timeout = module.params['timeout_request']

    def call(self, method, path, body=None, answered=()):
        """Status and body; an HTTP error fails the module unless its status is one of ``answered``."""
        data = json.dumps(body) if body is not None else None
        try:
            response = open_url(self.base + path, method=method, data=data, headers=self.headers,
                                timeout=self.timeout, validate_certs=True)
            return response.getcode(), response.read()
        except HTTPError as exc:
            text = exc.read() if hasattr(exc, 'read') else b''
            if exc.code in answered:
                return exc.code, text
            if exc.code == 401:
                self.module.fail_json(msg='The router at %s refused %s %s (401): router_api_key is not the key of its'
                                          ' /workers API (sglang_router_admin_api_key with smg when set, else'
                                          ' sglang_router_api_key).' % (self.base, method, path))
            self.module.fail_json(msg='The router at %s answered %s %s with %s: %s'
                                      % (self.base, method, path, exc.code, text[:300]))
        except (URLError, OSError) as exc:
            self.module.fail_json(msg='The router at %s does not answer %s %s: %s' % (self.base, method, path, exc))

    def workers(self):
        _status, text = self.call('GET', '/workers')
        try:
            return parse_workers(text)
        except SglangRouterWorkersError as exc:
            self.module.fail_json(msg=str(exc))

    def wait_until_ready(self, deadline):
        """Until /readiness answers 200: the router takes requests (it answers 503 without enough healthy workers)."""
        ready_by = max(deadline, time.time() + READY_AFTER_HEALTHY_S)
        while True:
            # Without the key: the probe is open to anyone, and smg checks a key sent to it as a client key.
            try:
                response = open_url(self.base + '/readiness', method='GET', timeout=self.timeout)
                status, text = response.getcode(), response.read()
            except HTTPError as exc:
                status, text = exc.code, exc.read() if hasattr(exc, 'read') else b''
            except (URLError, OSError) as exc:
                status, text = None, ('%s' % exc).encode()
            if status == 200:
                return
            if time.time() >= ready_by:
                self.module.fail_json(msg='The router at %s lists the worker healthy, but its /readiness still answers'
                                          ' %s: %s' % (self.base, status, text[:300]))
            time.sleep(1)

    def job_status(self, worker_id):
        try:
            response = open_url('%s/workers/%s' % (self.base, worker_id), method='GET', headers=self.headers,
                                timeout=self.timeout)
            return json.loads(response.read()).get('job_status')
        except (HTTPError, URLError, OSError, ValueError):
            return None


def _read_members(module, path):
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        module.fail_json(msg='Cannot read the router membership file %s: %s. Remove it; the next deploy writes it'
                             ' again.' % (path, exc))


# New nodes join at once, each running this module on the router's host: the membership file is
# read and written under one flock, so that no join writes over another's entry.
MEMBERS_LOCK = 'inferops-serving-router-members.lock'


def _record_members(module, path, url, state, api_key):
    """Whether the membership file changed (in check mode: would change)."""
    try:
        with held_flock(MEMBERS_LOCK, timeout=60, shared=module.check_mode):
            before = _read_members(module, path)
            after = members_after(before, url, state, api_key)
            if after == before:
                return False
            directory = os.path.dirname(path) or '.'
            if not os.path.isdir(directory):
                module.fail_json(msg='The folder of the router membership file %s does not exist on this host: deploy'
                                     ' the router (role sglang_router) here first.' % path)
            if not module.check_mode:
                handle, temporary = tempfile.mkstemp(dir=directory, prefix='.workers.')
                with os.fdopen(handle, 'w') as out:
                    json.dump(after, out, indent=1, sort_keys=True)
                # mkstemp made it 0600; a rename in the same folder keeps that mode and is atomic
                # (atomic_move would give a new file the umask's mode).
                os.replace(temporary, path)
            return True
    except NodeLockError as exc:
        module.fail_json(msg='Cannot record %s in the router membership file %s: %s' % (url, path, exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router_url=dict(type='str', required=True),
            router_api_key=dict(type='str', no_log=True),
            url=dict(type='str', required=True),
            worker_api_key=dict(type='str', no_log=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            wait=dict(type='bool', default=True),
            timeout=dict(type='int', default=120),
            timeout_request=dict(type='int', default=10),
            members_file=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    router = _Router(module)
    url = params['url']
    try:
        decision = plan(router.workers(), url, params['state'])
    except SglangRouterWorkersError as exc:
        module.fail_json(msg=str(exc))
    action = decision['action']
    worker_id = (decision['worker'] or {}).get('id')
    if module.check_mode or action == 'none':
        wait_needed = params['wait'] and not module.check_mode and (
            decision['draining'] if params['state'] == 'absent' else not is_routed(decision['worker']))
        if not wait_needed:
            if params['wait'] and params['state'] == 'present' and not module.check_mode:
                router.wait_until_ready(time.time() + params['timeout'])
            workers = router.workers()
            recorded = params['members_file'] is not None and _record_members(
                module, params['members_file'], url, params['state'], params['worker_api_key'])
            module.exit_json(changed=action != 'none' or recorded, action=action, worker=decision['worker'],
                             worker_id=worker_id, workers=dict((w['url'], w['is_healthy']) for w in workers))

    deadline = time.time() + params['timeout']
    if action == 'add' and decision['draining']:
        # smg would take the add of a worker it still drains for a duplicate, then forget the worker.
        while is_draining(find_worker(router.workers(), url)):
            if time.time() >= deadline:
                module.fail_json(msg='The router at %s still drains %s %s s later: it was being removed; run again'
                                     ' once it is gone.' % (router.base, url, params['timeout']))
            time.sleep(1)
    if action == 'add':
        status, text = router.call('POST', '/workers', add_request(url, params['worker_api_key']), answered=(409,))
        try:
            answer = add_answer(status, text)
        except SglangRouterWorkersError as exc:
            module.fail_json(msg='The router at %s did not take %s: %s' % (router.base, url, exc))
        worker_id = answer['worker_id'] or worker_id
        if answer['already']:
            # smg has it already (listed since the list was read, or an earlier add still runs): this
            # run asked for nothing new, and waits like any other.
            action = 'none'
    elif action == 'remove':
        router.call('DELETE', '/workers/%s' % worker_id)

    while True:
        workers = router.workers()
        entry = find_worker(workers, url)
        done = (entry is None) if params['state'] == 'absent' else is_routed(entry)
        if done or not params['wait']:
            break
        if time.time() >= deadline:
            job = router.job_status(worker_id) if worker_id else None
            if params['state'] == 'absent':
                module.fail_json(msg='The router at %s still lists %s %s s after it was asked to remove it%s.'
                                     % (router.base, url, params['timeout'],
                                        ' (draining)' if is_draining(entry) else ''), worker=entry, job_status=job)
            module.fail_json(
                msg='The router at %s does not list %s as healthy %s s after it was asked to add it (%s). The router '
                    'adds a worker only once its /health, /server_info and /model_info answer.%s'
                    % (router.base, url, params['timeout'],
                       ('listed, %s' % (entry.get('status') or 'unhealthy')) if entry else 'not listed',
                       (' Router job: %s' % (job.get('message') or job)) if isinstance(job, dict) else ''),
                worker=entry, job_status=job)
        time.sleep(1)
    if params['wait'] and params['state'] == 'present':
        router.wait_until_ready(deadline)
    recorded = params['members_file'] is not None and _record_members(
        module, params['members_file'], url, params['state'], params['worker_api_key'])
    module.exit_json(changed=action != 'none' or recorded, action=action, worker=entry,
                     worker_id=worker_id or (entry or {}).get('id'),
                     workers=dict((w['url'], w['is_healthy']) for w in workers))


if __name__ == '__main__':
    main()
