# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollback of an experiment by its files alone, as one sequence of module runs.

When all the experiment changed is files the deploy record lists (deploy_state's snapshot
before the trial), the rollback puts them back, restarts the server on them, waits until it
answers its ready path and records that the configuration before the experiment runs again.
Any step that does not succeed makes it a rollback by converge instead: ``restored`` is false
and ``reasons`` says why. The runner of modules is given (the action plugin's), so the sequence
is tested without a node.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import time

from ansible_collections.inferops.serving.plugins.module_utils._history import RESERVED

READY_REQUEST_TIMEOUT_S = 10


def _failure(result):
    return ('%s' % (result.get('msg') or 'failed'))[:300]


def _by_converge(reason, changed):
    return {'restored': False, 'files': [], 'reasons': [reason], 'changed': changed}


def rollback_by_files(run_module, deploy_record, service, ready_url, ready_timeout, history, node, deploy,
                      clock=time.time, sleep=time.sleep):
    """Puts back the files, restarts ``service`` when any changed, waits up to ``ready_timeout`` s for
    ``ready_url`` to answer 200 and records ``deploy`` (the history's deploy record before the trial)
    again. ``run_module(name, args)`` runs one module on the node and returns its result."""
    restore = run_module('inferops.serving.deploy_state', {'state': 'restore', 'path': deploy_record})
    if restore.get('failed'):
        return _by_converge('putting back the files failed: %s' % _failure(restore), False)
    if not restore.get('restored'):
        return {'restored': False, 'files': [], 'reasons': list(restore.get('reasons') or []),
                'changed': bool(restore.get('changed'))}
    files = list(restore.get('files') or [])
    if files:
        restart = run_module('ansible.legacy.systemd_service',
                             {'name': service, 'state': 'restarted', 'daemon_reload': True})
        if restart.get('failed'):
            return _by_converge('restarting %s failed: %s' % (service, _failure(restart)), True)
    deadline = clock() + float(ready_timeout)
    while True:
        answer = run_module('ansible.legacy.uri', {'url': ready_url, 'status_code': [200],
                                                   'timeout': READY_REQUEST_TIMEOUT_S})
        if not answer.get('failed') and answer.get('status') == 200:
            break
        if clock() >= deadline:
            return _by_converge('%s did not answer 200 within %s s after the files were put back (last: %s)'
                                % (ready_url, ready_timeout, answer.get('status') or _failure(answer)), True)
        sleep(1)
    # The history stamps time, event and node on a record itself: the deploy's own fields only.
    fields = dict((key, value) for key, value in (deploy or {}).items() if key not in RESERVED)
    recorded = run_module('inferops.serving.history', {'path': history, 'event': 'deploy', 'node': node,
                                                       'once_per_fingerprint': True, 'fields': fields})
    if recorded.get('failed'):
        return _by_converge('recording the deploy that runs again failed: %s' % _failure(recorded), True)
    return {'restored': True, 'files': files, 'reasons': [], 'changed': True}
