# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run at a time per node: the lock record, who holds it, and when it may be taken over.

A run (one ``ansible-playbook`` process on one controller) writes a small JSON record on the
node before it changes anything and removes it at the end. A second run finds the record and
waits a bounded time, or fails saying who holds it since when. A record left behind by a run
that was killed is recognised as stale when

- the node has rebooted since it was written (its boot id differs) and the record does not say
  that its run is rebooting the node, or
- it says that its run is rebooting the node, and the bound that run gave for the node to come
  back has passed, or
- it names this controller and a process that no longer runs there (checked on the controller).

A run that reboots the node itself (the driver install) marks its record first (``mark_rebooting``):
the lock outlives the boot it was taken in, another run finds it held and names the rebooting run,
and the holder takes it into the new boot (``decide`` answers ``refresh``) when the node is back.

Modules that edit files on the node also take an ``flock`` while they work (``held_flock``):
killing ``ansible-playbook`` does not stop a module already running on the node, so a run that
takes over a stale lock still waits for such a module to finish instead of interleaving with it.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import datetime
import errno
import fcntl
import json
import os
import time

RECORD_KEYS = ('run_id', 'controller', 'user', 'pid', 'playbook', 'purpose', 'since', 'epoch', 'boot_id',
               'rebooting_until')
FLOCK_DIR = '/run/lock'


class NodeLockError(Exception):
    """A lock record that cannot be read or written."""


def iso_utc(epoch):
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def make_record(holder, boot_id, epoch):
    record = dict((key, holder.get(key)) for key in ('controller', 'user', 'pid', 'playbook', 'purpose'))
    record['run_id'] = run_id(holder)
    record['since'] = iso_utc(epoch)
    record['epoch'] = round(epoch, 3)
    record['boot_id'] = boot_id
    return record


def run_id(holder):
    """One ansible-playbook process: every play and batch of it shares the id."""
    return '%s:%s:%s' % (holder.get('controller'), holder.get('pid'), holder.get('started', ''))


def parse_record(text):
    """The record in a lock file, or None when it is empty or unreadable (a crash mid-write)."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or not record.get('run_id'):
        return None
    return record


def mark_rebooting(record, now, bound):
    """The record of a run about to reboot the node: it holds the lock until ``now + bound``."""
    marked = dict(record)
    marked['rebooting_until'] = round(now + bound, 3)
    return marked


def is_rebooting(record, now):
    """True while the record says its run reboots the node and the bound it gave has not passed."""
    until = record.get('rebooting_until')
    return isinstance(until, (int, float)) and not isinstance(until, bool) and now < until


def decide(current, holder, boot_id, break_run_id=None, now=None):
    """What acquiring means now.

    Returns ``(action, reason)``: ``take`` (free, stale, or broken on purpose), ``keep`` (this
    run already holds it), ``refresh`` (this run holds it from before a reboot: write it again
    with this boot's id and without the rebooting mark) or ``held`` (someone else does).
    """
    now = time.time() if now is None else now
    if current is None:
        return 'take', None
    if current.get('run_id') == run_id(holder):
        if current.get('rebooting_until') is not None or (boot_id and current.get('boot_id') != boot_id):
            return 'refresh', None
        return 'keep', None
    if break_run_id and current.get('run_id') == break_run_id:
        return 'take', 'took over the lock of %s, which no longer runs' % describe(current)
    if current.get('rebooting_until') is not None:
        if is_rebooting(current, now):
            return 'held', None
        return 'take', ('%s rebooted the node and was to be back by %s; it did not take its lock again, so its'
                        ' run ended' % (describe(current), iso_utc(current['rebooting_until'])))
    if current.get('boot_id') and boot_id and current.get('boot_id') != boot_id:
        return 'take', 'the node rebooted since %s; the run that held the lock ended with that boot' % describe(current)
    return 'held', None


def refreshed(record, boot_id):
    """This run's record carried into the boot it rebooted the node into."""
    record = dict((key, value) for key, value in record.items() if key != 'rebooting_until')
    record['boot_id'] = boot_id
    return record


def describe(record):
    rebooting = record.get('rebooting_until')
    return '%s@%s (pid %s, %s%s) since %s%s' % (
        record.get('user') or '?', record.get('controller') or '?', record.get('pid') or '?',
        record.get('playbook') or '?', (', ' + record['purpose']) if record.get('purpose') else '',
        record.get('since') or '?',
        (', rebooting the node (back by %s)' % iso_utc(rebooting)) if isinstance(rebooting, (int, float)) else '')


def held_message(current, path, waited):
    return ('This node is locked by another run: %s. %s Nothing was changed by this run. Wait for that run to'
            ' finish, or set serving_node_lock_wait (seconds) to wait for it; if that run was killed on another'
            ' controller, remove %s on the node (or set serving_node_lock_break=true) and run again.'
            % (describe(current), ('Waited %d s.' % waited) if waited else 'Not waiting (serving_node_lock_wait=0).', path))


def holder_is_gone(current, controller, pid_alive):
    """True when the record names this controller and its process is no longer alive there."""
    if not current or current.get('controller') != controller:
        return False
    try:
        pid = int(current.get('pid'))
    except (TypeError, ValueError):
        return False
    return not pid_alive(pid)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def read_file(path):
    try:
        with open(path, 'r') as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise NodeLockError('cannot read %s: %s' % (path, exc))


def write_atomically(path, text, mode=0o644):
    directory = os.path.dirname(path) or '.'
    temporary = os.path.join(directory, '.%s.%d.tmp' % (os.path.basename(path), os.getpid()))
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, text.encode('utf-8'))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, path)


class held_flock(object):
    """``with held_flock(name, timeout):`` an exclusive flock on /run/lock/<name> for a node-side edit.

    Waits up to ``timeout`` seconds, then raises NodeLockError naming the lock.
    """

    def __init__(self, name, timeout=600.0, directory=FLOCK_DIR, shared=False):
        self.path = os.path.join(directory if os.path.isdir(directory) else '/tmp', name)
        self.timeout = timeout
        self.shared = shared
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.time() + self.timeout
        operation = (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(self.fd, operation)
                return self
            except (IOError, OSError) as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.time() >= deadline:
                os.close(self.fd)
                self.fd = None
                raise NodeLockError('another run is still editing files on this node (it holds %s for more than'
                                    ' %d s); wait for it to finish and run again' % (self.path, self.timeout))
            time.sleep(0.2)

    def __exit__(self, *exc_info):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        return False
