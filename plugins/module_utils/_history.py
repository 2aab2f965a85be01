# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's history: one JSON object per line, appended, never rewritten.

Every deploy, benchmark and experiment outcome lands here so that a report can
draw throughput over time and mark where experiments and rollbacks happened.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import datetime
import errno
import json

EVENTS = ('deploy', 'benchmark', 'experiment', 'rollback', 'campaign')

# Keys the history itself owns; caller fields may not overwrite them.
RESERVED = ('ts', 'epoch', 'event', 'node')


class HistoryError(Exception):
    """A record or history file that cannot be used."""


def iso_utc(epoch):
    stamp = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    return stamp.strftime('%Y-%m-%dT%H:%M:%SZ')


def parse_history(text):
    """Return (records, skipped_line_numbers).

    A line that does not parse (a crash mid-append leaves a torn last line)
    is skipped rather than fatal: losing one record must not make every later
    deploy fail. Callers report the skipped lines.
    """
    records = []
    skipped = []
    # Only "\n" ends a record; str.splitlines would also split on form feeds and the like.
    for number, line in enumerate(text.split('\n'), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            skipped.append(number)
            continue
        if not isinstance(record, dict) or record.get('event') not in EVENTS:
            skipped.append(number)
            continue
        records.append(record)
    return records, skipped


def torn_tail(data):
    """What a crash mid-write left at the end of the history, if anything.

    ``data`` is the file's bytes. Returns None when the file is empty or ends with a newline, else
    ``(line_number, is_whole_record)`` of the unterminated last line. A whole record only lacks
    its newline; anything else is a torn fragment. Either way the next append must first end
    that line, or the new record would be glued to it and lost to every reader.
    """
    if not data or data.endswith(b'\n'):
        return None
    line_number = data.count(b'\n') + 1
    tail = data[data.rfind(b'\n') + 1:]
    try:
        record = json.loads(tail.decode('utf-8'))
    except ValueError:
        return line_number, False
    return line_number, isinstance(record, dict) and record.get('event') in EVENTS


def torn_tail_warning(path, tail):
    line_number, whole = tail
    if whole:
        return ('%s: line %d was a whole record without its newline (a write cut short); the newline was added'
                % (path, line_number))
    return ('%s: line %d is a torn record (a write cut short by a crash); it is kept as it is, ended with a'
            ' newline, and skipped by readers' % (path, line_number))


def load(path):
    """Records and skipped line numbers of the history file at ``path``; a missing file is empty."""
    try:
        with open(path, 'rb') as handle:
            text = handle.read().decode('utf-8', 'replace')
    except (IOError, OSError) as exc:
        if getattr(exc, 'errno', None) == errno.ENOENT:
            return [], []
        raise HistoryError('cannot read %s: %s' % (path, exc))
    return parse_history(text)


def make_record(event, node, fields, epoch):
    """Build a record; ``fields`` must not claim the keys the history owns."""
    if event not in EVENTS:
        raise HistoryError('event must be one of %s, got %r' % (', '.join(EVENTS), event))
    fields = dict(fields or {})
    clash = sorted(k for k in fields if k in RESERVED)
    if clash:
        raise HistoryError('fields may not set %s: the history fills them in' % ', '.join(clash))
    record = {'ts': iso_utc(epoch), 'epoch': round(epoch, 3), 'event': event, 'node': node}
    record.update(fields)
    try:
        json.dumps(record, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise HistoryError('record cannot be stored as JSON: %s' % exc)
    return record


def serialize(record):
    return json.dumps(record, sort_keys=True, separators=(',', ':'), allow_nan=False) + '\n'


def latest(records, event=None, **match):
    """The newest record of ``event`` whose fields equal ``match`` (None when there is none)."""
    for record in reversed(records):
        if event is not None and record.get('event') != event:
            continue
        if all(record.get(key) == value for key, value in match.items()):
            return record
    return None


def venvs_served(records):
    """The venvs the deploys of ``records`` served from, oldest first: one entry per deploy record
    that names one (records of releases before venvs were recorded name none)."""
    return [record['venv'] for record in records if record.get('event') == 'deploy' and record.get('venv')]


def is_repeat(records, record, key='fingerprint'):
    """True when the newest record of the same event already carries the same ``key`` value.

    Deploys are recorded once per configuration: a no-op redeploy changes nothing
    on the node, so it must not grow the history either (and stays changed=0).
    """
    if record.get(key) is None:
        return False
    previous = latest(records, record['event'])
    return previous is not None and previous.get(key) == record.get(key)


def _same_workload(recorded, wanted):
    """Whether two workloads are one (values compared as text: 64 and "64" are the same)."""
    if not isinstance(recorded, dict):
        return False
    return ({str(key): str(value) for key, value in recorded.items()}
            == {str(key): str(value) for key, value in wanted.items()})


def recent_benchmark(records, fingerprint, max_age_s, now, workload=None):
    """The newest benchmark of this exact configuration that is at most ``max_age_s`` old.

    A benchmark only stands for the running server when it measured the configuration
    that runs now (same fingerprint); one that is too old is measured again. With
    ``workload`` (the benchmark's prompts, requests in flight, lengths), only one that ran
    that workload counts: throughput under another load is not comparable, and a record
    that does not say its workload is measured again.
    """
    if max_age_s is not None and max_age_s < 0:
        raise HistoryError('max_age must not be negative, got %r' % (max_age_s,))
    for record in reversed(records):
        if record.get('event') != 'benchmark' or record.get('fingerprint') != fingerprint:
            continue
        if workload is not None and not _same_workload(record.get('workload'), workload):
            continue
        metrics = record.get('metrics') or {}
        if not metrics.get('output_throughput'):
            continue
        if max_age_s is not None and now - float(record.get('epoch', 0)) > max_age_s:
            return None
        return record
    return None
