# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of node_lock: who this run is, whether a holder on this controller still runs, waiting."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import getpass
import os
import socket
import time

from ansible.plugins.action import ActionBase
from ansible_collections.inferops.serving.plugins.module_utils._node_lock import (
    describe,
    held_message,
    holder_is_gone,
    pid_alive,
)


def _this_run():
    """The ansible-playbook process: the parent of this task's worker process."""
    pid = os.getppid()
    started = ''
    playbooks = []
    try:
        with open('/proc/%d/stat' % pid) as handle:
            # Field 22 (start time in clock ticks) makes the id unique even when the pid is reused.
            started = handle.read().rsplit(')', 1)[1].split()[19]
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            # Only the playbook file names: other words of the command line may carry -e secrets.
            words = handle.read().decode('utf-8', 'replace').split('\0')
            playbooks = [os.path.basename(w) for previous, w in zip([''] + words, words)
                         if w.endswith(('.yml', '.yaml')) and '=' not in w
                         and previous not in ('-i', '--inventory', '-e', '--extra-vars')]
    except (IOError, OSError, IndexError):
        pass
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry for the uid (containers)
        user = str(os.getuid())
    return {'controller': socket.gethostname(), 'user': user, 'pid': pid, 'started': started,
            'playbook': ' '.join(playbooks) or 'ansible-playbook'}


class ActionModule(ActionBase):

    _VALID_ARGS = frozenset(('state', 'path', 'purpose', 'wait', 'poll', 'force', 'reboot_bound'))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        try:
            wait = max(int(args.get('wait', 0) or 0), 0)
            poll = max(int(args.get('poll', 5) or 5), 1)
        except (TypeError, ValueError):
            result.update(failed=True, msg='node_lock: wait and poll are seconds (whole numbers), got %r and %r'
                          % (args.get('wait'), args.get('poll')))
            return result
        me = _this_run()
        args['holder'] = me
        deadline = time.time() + wait
        started = time.time()
        waited_for = None
        while True:
            outcome = self._execute_module(module_name='inferops.serving.node_lock', module_args=args,
                                           task_vars=task_vars)
            # Only acquiring waits: releasing and marking the lock before a reboot touch this run's own lock.
            if outcome.get('failed') or args.get('state', 'present') != 'present' or outcome.get('acquired'):
                result.update(outcome)
                # Said by the lock task: this run waited, so what it does next follows the other run.
                result.update(waited=int(time.time() - started) if waited_for else 0, waited_for=waited_for)
                return result
            current = outcome.get('held_by') or {}
            waited_for = describe(current)
            if holder_is_gone(current, me['controller'], pid_alive) and args.get('break_run_id') != current.get('run_id'):
                args['break_run_id'] = current.get('run_id')
                continue
            if time.time() >= deadline or self._task.check_mode:
                result.update(outcome)
                result.update(failed=True, msg=held_message(current, args.get('path') or
                                                            '/var/lib/inferops-serving/node.lock',
                                                            int(time.time() - started)))
                return result
            time.sleep(min(poll, max(deadline - time.time(), 0.1)))
