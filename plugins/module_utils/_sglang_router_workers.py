# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The SGLang router's worker API (sglang-router 0.3.2 and smg 1.13.0) and a server's load.

``GET /workers`` answers ``{"workers": [{"id", "url", "model_id", "is_healthy", "load", ...}],
"total", "stats"}``. ``POST /workers`` and ``DELETE /workers/{id}`` answer 202 and do the work
in the background: a worker appears in the list only once the router reached its ``/health``,
``/server_info`` and ``/model_info``, and a worker that never answers is never listed.

Where smg differs: an entry has ``status`` (``ready``, ``not_ready``, ``draining``) and
``labels`` where 0.3.2 had ``metadata``; ``POST /workers`` of a URL it lists or is adding answers
409 (0.3.2: 202 with the same id); it refuses a scheme in capitals and keeps ``http://w:8000/``
apart from ``http://w:8000``; a removed worker is listed as ``draining`` for some seconds before
it is gone (0.3.2: gone at once).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import ipaddress
import json
import re


class SglangRouterWorkersError(Exception):
    """An answer of the router or of a server that cannot be read."""


def worker_url(address, port):
    """The URL a router reaches a node's server at: ``http://<address>:<port>``, an IPv6 address in
    brackets; empty without a port (the node runs no server)."""
    if port in (None, ''):
        return ''
    host = address.strip('[]')
    try:
        if ipaddress.ip_address(host).version == 6:
            return 'http://[%s]:%s' % (host, port)
    except ValueError:
        pass
    return 'http://%s:%s' % (address, port)


def normalize_url(url):
    """``HTTP://Host:8000/`` -> ``http://host:8000``: the router lists workers as they were given, and smg
    refuses the first spelling and would register the second as a worker of its own."""
    if not isinstance(url, str) or '://' not in url:
        raise SglangRouterWorkersError('worker URL %r is not an http(s) URL' % (url,))
    scheme, rest = url.split('://', 1)
    host, _slash, path = rest.partition('/')
    path = path.strip('/')
    return '%s://%s%s' % (scheme.lower(), host.lower(), ('/' + path) if path else '')


def parse_workers(text):
    """The worker entries of a ``GET /workers`` answer, each with ``id``, ``url``, ``is_healthy``."""
    try:
        body = json.loads(text) if isinstance(text, (str, bytes)) else text
    except ValueError:
        raise SglangRouterWorkersError('GET /workers did not answer JSON: %r' % (text[:200],))
    if not isinstance(body, dict) or not isinstance(body.get('workers'), list):
        raise SglangRouterWorkersError('GET /workers answered without a "workers" list: %r' % (str(body)[:200],))
    workers = []
    for entry in body['workers']:
        if not isinstance(entry, dict) or 'url' not in entry or 'id' not in entry:
            raise SglangRouterWorkersError('a worker entry lacks "id" or "url": %r' % (entry,))
        workers.append({
            'id': entry['id'],
            'url': entry['url'],
            'model_id': entry.get('model_id'),
            'is_healthy': bool(entry.get('is_healthy')),
            'load': entry.get('load'),
            # smg only; None from sglang-router 0.3.2.
            'status': entry.get('status'),
            'labels': entry.get('labels') if entry.get('labels') is not None else (entry.get('metadata') or {}),
        })
    return workers


def find_worker(workers, url):
    wanted = normalize_url(url)
    for worker in workers:
        if normalize_url(worker['url']) == wanted:
            return worker
    return None


def is_draining(worker):
    """Removed, but still listed while smg lets its requests finish."""
    return worker is not None and worker.get('status') == 'draining'


def is_routed(worker):
    """Listed and receiving requests: healthy, and (smg) ready rather than draining or pending."""
    return worker is not None and worker['is_healthy'] and worker.get('status') in (None, 'ready')


def plan(workers, url, state):
    """What to do for one worker: ``{'action': 'add'|'remove'|'none', 'worker': entry or None,
    'draining': bool}``. A draining worker is on its way out: it is added again once it is gone,
    and a removal has nothing to ask for but its end."""
    if state not in ('present', 'absent'):
        raise SglangRouterWorkersError('state must be present or absent, got %r' % (state,))
    worker = find_worker(workers, url)
    draining = is_draining(worker)
    if state == 'present':
        return {'action': 'add' if worker is None or draining else 'none', 'worker': worker, 'draining': draining}
    return {'action': 'remove' if worker is not None and not draining else 'none', 'worker': worker,
            'draining': draining}


def add_request(url, api_key=None):
    """Body of ``POST /workers``, the URL in the one spelling smg accepts and matches: workers added at
    run time get no key unless the request carries one."""
    body = {'url': normalize_url(url)}
    if api_key:
        body['api_key'] = api_key
    return body


# smg's codes for a URL it lists already or is adding; the id follows "with ID" in the message.
_ALREADY = {'WORKER_ALREADY_EXISTS': 'listed', 'WORKER_CREATE_IN_PROGRESS': 'adding'}
_WORKER_ID = re.compile(r'with ID ([0-9A-Fa-f-]{36})')


def add_answer(status, text):
    """What ``POST /workers`` answered: ``{'worker_id': id or None, 'already': None|'listed'|'adding'}``.

    202 is an accepted add (and sglang-router 0.3.2's answer for a URL it has). smg answers 409
    for a URL it lists or is still adding: the worker is there, or on its way. Anything else
    raises, with the router's words.
    """
    try:
        body = json.loads(text) if isinstance(text, (str, bytes)) and text else {}
    except ValueError:
        body = None
    if status in (200, 201, 202):
        return {'worker_id': body.get('worker_id') if isinstance(body, dict) else None, 'already': None}
    if status == 409 and isinstance(body, dict) and body.get('code') in _ALREADY:
        match = _WORKER_ID.search(str(body.get('error', '')))
        return {'worker_id': match.group(1) if match else None, 'already': _ALREADY[body['code']]}
    shown = text.decode('utf-8', 'replace') if isinstance(text, bytes) else str(text)
    raise SglangRouterWorkersError('POST /workers answered %s: %s' % (status, shown[:300]))


def members_after(members, url, state, api_key=None):
    """The router's desired membership after one worker joined or left it.

    ``members`` is the membership file's content, ``{"workers": {url: {"api_key": key or null}}}``
    (``None`` or ``{}`` when the file does not exist yet). A restarted router has no workers:
    its unit adds those of this file again (sglang-launch restore-workers), so the file follows
    every add and remove.
    """
    workers = dict((members or {}).get('workers') or {})
    key = normalize_url(url)
    if state == 'present':
        workers[key] = {'api_key': api_key or None}
    else:
        workers.pop(key, None)
    return {'workers': dict(sorted(workers.items()))}


_METRIC_LINE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
# With --enable-priority-scheduling SGLang 0.5.23 writes these gauges twice: the total under
# priority="" and each priority's share under priority="<n>" (observability/metrics_collector.py,
# _log_gauge_queue_count). Only the totals count; 0.5.9 has no priority label.
_PRIORITY_SHARE = re.compile(r'(?:^|,)\s*priority="[^"]')
# SGLang servers write sglang:<name> (0.5.9 and 0.5.23 alike); sgl-router's /engine_metrics
# turns the colon into an underscore (sglang issue 12618): both are read.
_IN_FLIGHT = ('num_running_reqs', 'num_queue_reqs')


def requests_in_flight(metrics_text):
    """Requests a server still holds, from its Prometheus ``/metrics``: ``{'running': n, 'queued': n}``.

    Sums over label sets (one series per model / tensor-parallel rank group), leaving out the
    per-priority shares of SGLang's priority scheduling. Raises when the
    text has neither gauge: the server does not export them (SGLang needs --enable-metrics).
    """
    totals = {}
    for line in (metrics_text or '').splitlines():
        if not line or line.startswith('#'):
            continue
        match = _METRIC_LINE.match(line)
        if not match:
            continue
        name = match.group('name')
        if _PRIORITY_SHARE.search(match.group('labels') or ''):
            continue
        for gauge in _IN_FLIGHT:
            if name in ('sglang:' + gauge, 'sglang_' + gauge):
                try:
                    totals[gauge] = totals.get(gauge, 0.0) + float(match.group('value'))
                except ValueError:
                    raise SglangRouterWorkersError('%s has no number: %r' % (name, line))
    if 'num_running_reqs' not in totals:
        raise SglangRouterWorkersError(
            'the server\'s /metrics has no sglang:num_running_reqs gauge; start SGLang with --enable-metrics '
            '(sglang_server_args: {enable-metrics: true}) so that a drain can see its requests finish')
    return {'running': int(totals['num_running_reqs']), 'queued': int(totals.get('num_queue_reqs', 0))}


def drain_left(in_flight, timeout, last_error):
    """What a drain that did not end left, in words: requests still running and queued at the bound
    (``in_flight``, as requests_in_flight read it), else why the last read of ``/metrics`` got no
    gauges (``last_error``: no answer, or its HTTP status)."""
    if in_flight is not None:
        return 'it is out of the router, but %s requests are still running and %s queued after %s s' % (
            in_flight['running'], in_flight['queued'], timeout)
    return 'its /metrics did not answer within %s s: %s' % (timeout, last_error)


def drain(read_health, read_metrics, timeout, interval, clock, sleep):
    """Wait until a server out of the router holds no request, at most ``timeout`` seconds.

    ``read_health`` and ``read_metrics`` are called with no argument and answer ``(status, text,
    error)`` (status none when nothing answered); ``clock`` and ``sleep`` are ``time.time`` and
    ``time.sleep``. A server whose ``/health`` does not answer 200 holds no request a drain could save.
    Ends at the bound however long each read takes; a ``/metrics`` without the gauges ends it at once.
    Returns ``answered`` (``/health``), ``drained``, ``in_flight`` (the last read), ``reads`` and
    ``left`` (drain_left's words, empty when drained).
    """
    status, _text, _error = read_health()
    if status != 200:
        return {'answered': False, 'drained': True, 'in_flight': None, 'reads': 0, 'left': ''}
    deadline = clock() + timeout
    reads = 0
    while True:
        status, text, error = read_metrics()
        reads += 1
        in_flight = None
        if status == 200:
            try:
                in_flight = requests_in_flight(text)
            except SglangRouterWorkersError as exc:
                return {'answered': True, 'drained': False, 'in_flight': None, 'reads': reads, 'left': str(exc)}
            if in_flight['running'] == 0 and in_flight['queued'] == 0:
                return {'answered': True, 'drained': True, 'in_flight': in_flight, 'reads': reads, 'left': ''}
        if clock() >= deadline:
            return {'answered': True, 'drained': False, 'in_flight': in_flight, 'reads': reads,
                    'left': drain_left(in_flight, timeout, error or 'status %s' % status)}
        sleep(max(0, min(interval, deadline - clock())))
