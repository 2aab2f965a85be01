# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_workers import (
    SglangRouterWorkersError,
    add_request,
    parse_workers,
    plan,
    requests_in_flight,
)

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang_router', '0.3.2')


@pytest.fixture(scope='module')
def workers():
    with open(os.path.join(FIXTURES, 'workers.json')) as handle:
        return parse_workers(handle.read())


def test_workers_answer(workers):
    assert workers == [{'id': '775c82cc-aaa4-4cd8-8fe8-6d9e92e98aa6', 'url': 'http://127.0.0.1:18001',
                        'model_id': 'glm-5', 'is_healthy': True, 'load': 0}]


@pytest.mark.parametrize('url, state, action', [
    ('http://127.0.0.1:18001', 'present', 'none'),
    ('HTTP://127.0.0.1:18001/', 'present', 'none'),
    ('http://127.0.0.1:18002', 'present', 'add'),
    ('http://127.0.0.1:18001', 'absent', 'remove'),
    ('http://127.0.0.1:18002', 'absent', 'none'),
])
def test_plan(workers, url, state, action):
    assert plan(workers, url, state)['action'] == action


def test_add_request_carries_the_workers_key_only_when_given():
    assert add_request('http://w:8000') == {'url': 'http://w:8000'}
    assert add_request('http://w:8000', 'k') == {'url': 'http://w:8000', 'api_key': 'k'}


@pytest.mark.parametrize('text', ['<html>', '{"total": 0}', '{"workers": [{"url": "x"}]}'])
def test_unreadable_workers_answer(text):
    with pytest.raises(SglangRouterWorkersError):
        parse_workers(text)


SGLANG_METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="glm-5",pp_rank="0",tp_rank="0"} 3.0
sglang:num_running_reqs{engine_type="unified",model_name="glm-5",pp_rank="0",tp_rank="1"} 2.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="glm-5",pp_rank="0",tp_rank="0"} 1.0
sglang:gen_throughput{model_name="glm-5"} 1867.2
"""


@pytest.mark.parametrize('text, expected', [
    (SGLANG_METRICS, {'running': 5, 'queued': 1}),
    (SGLANG_METRICS.replace('sglang:', 'sglang_'), {'running': 5, 'queued': 1}),
    ('sglang:num_running_reqs{model_name="m"} 0.0\n', {'running': 0, 'queued': 0}),
])
def test_requests_in_flight(text, expected):
    assert requests_in_flight(text) == expected


def test_requests_in_flight_counts_the_totals_of_priority_scheduling_once():
    # SGLang 0.5.23's own collector with --enable-priority-scheduling (fixtures/sglang_metrics/):
    # 5 running (3 + 2 by priority) and 1 queued, each total beside its per-priority series.
    with open(os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang_metrics',
                           '0.5.23_priority_scheduling.prom')) as handle:
        text = handle.read()
    assert 'priority="10"' in text
    assert requests_in_flight(text) == {'running': 5, 'queued': 1}


def test_metrics_without_the_gauge_say_what_to_enable():
    with pytest.raises(SglangRouterWorkersError, match='--enable-metrics'):
        requests_in_flight('# nothing here\n')


def test_the_membership_follows_every_join_and_leave():
    from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_workers import members_after
    joined = members_after(None, 'HTTP://10.0.0.12:8000/', 'present', 'k2')
    joined = members_after(joined, 'http://10.0.0.11:8000', 'present')
    assert joined == {'workers': {'http://10.0.0.11:8000': {'api_key': None},
                                  'http://10.0.0.12:8000': {'api_key': 'k2'}}}
    assert members_after(joined, 'http://10.0.0.12:8000', 'absent') == {
        'workers': {'http://10.0.0.11:8000': {'api_key': None}}}
    assert members_after({}, 'http://10.0.0.13:8000', 'absent') == {'workers': {}}
