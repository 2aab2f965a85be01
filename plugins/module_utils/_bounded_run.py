# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a command within a time bound, also one that cannot be stopped.

A command past its bound is killed with its whole process group: SIGTERM, then SIGKILL
``grace`` seconds later. A process stuck in the kernel does not die even of SIGKILL (nvidia-smi
waiting on a GPU that fell off the bus is the usual one): it is then left behind with its pipes
closed, so that the caller still returns about ``timeout + 2 * grace`` seconds after it started,
and says so (``stuck``). Imports nothing of Ansible: the node metrics collector uses it too.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import signal
import subprocess
import time


def run_bounded(argv, timeout, env=None, cwd=None, grace=5.0):
    """Run argv in a session of its own, at most ``timeout`` seconds.

    Returns a dict: ``rc`` (None when the process never ended), ``stdout``, ``stderr`` (what it
    printed before it ended; empty when stuck), ``timed_out``, ``stuck`` (it outlived SIGKILL)
    and ``seconds``. Raises OSError when argv cannot be started.
    """
    started = time.time()
    # Not AnsibleModule.run_command: it has no timeout and cannot start a session of its own.
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,  # pylint: disable=ansible-bad-function
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            universal_newlines=True, errors='replace')
    stdout = stderr = ''
    timed_out = stuck = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig in (signal.SIGTERM, signal.SIGKILL):
            _kill_group(proc.pid, sig)
            try:
                stdout, stderr = proc.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                pass
        else:
            # Waiting longer would wait for the kernel: leave the process to init.
            stuck = True
            for pipe in (proc.stdout, proc.stderr):
                pipe.close()
    # Children may outlive a command that ended on its own (NCCL ranks after a failed rank).
    _kill_group(proc.pid, signal.SIGKILL)
    return dict(rc=proc.poll(), stdout=stdout or '', stderr=stderr or '', timed_out=timed_out, stuck=stuck,
                seconds=round(time.time() - started, 3))


class CommandTimeout(Exception):
    """A command run with a time bound did not answer within it; its text is one clause for a
    message: which command, its bound, and whether it could be stopped."""

    def __init__(self, argv, timeout, stuck):
        super(CommandTimeout, self).__init__('`%s` did not answer within %s s%s' % (
            ' '.join(argv), _seconds(timeout), ' and did not end when killed (it waits in the kernel)' if stuck else ''))
        self.argv = list(argv)
        self.timeout = timeout
        self.stuck = stuck


def run_answered(argv, timeout, env=None, grace=5.0):
    """(rc, stdout, stderr) of ``run_bounded``; CommandTimeout when the command did not answer."""
    run = run_bounded(argv, timeout, env=env, grace=grace)
    if run['timed_out']:
        raise CommandTimeout(argv, timeout, run['stuck'])
    return run['rc'], run['stdout'], run['stderr']


def _seconds(value):
    return ('%d' % value) if float(value).is_integer() else ('%g' % value)


def _kill_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
