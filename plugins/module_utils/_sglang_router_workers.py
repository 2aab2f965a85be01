# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The SGLang router's worker list (``GET /workers``, sglang-router 0.3.2) and a server's load.

``GET /workers`` answers ``{"workers": [{"id", "url", "model_id", "is_healthy", "load", ...}],
"total", "stats"}``. ``POST /workers`` and ``DELETE /workers/{id}`` answer 202 and do the work
in the background: a worker appears in the list only once the router reached its ``/health``,
``/server_info`` and ``/model_info``, and a worker that never answers is never listed.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import re


class SglangRouterWorkersError(Exception):
    """An answer of the router or of a server that cannot be read."""


def normalize_url(url):
    """``HTTP://Host:8000/`` -> ``http://host:8000``: the router lists workers as they were given."""
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
        })
    return workers


def find_worker(workers, url):
    wanted = normalize_url(url)
    for worker in workers:
        if normalize_url(worker['url']) == wanted:
            return worker
    return None


def plan(workers, url, state):
    """What to do for one worker: ``{'action': 'add'|'remove'|'none', 'worker': entry or None}``."""
    if state not in ('present', 'absent'):
        raise SglangRouterWorkersError('state must be present or absent, got %r' % (state,))
    worker = find_worker(workers, url)
    if state == 'present':
        return {'action': 'none' if worker is not None else 'add', 'worker': worker}
    return {'action': 'remove' if worker is not None else 'none', 'worker': worker}


def add_request(url, api_key=None):
    """Body of ``POST /workers``: workers added at run time get no key unless the request carries one."""
    body = {'url': url}
    if api_key:
        body['api_key'] = api_key
    return body


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
