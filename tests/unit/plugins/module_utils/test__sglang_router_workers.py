# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_workers import (
    SglangRouterWorkersError,
    add_answer,
    add_request,
    is_draining,
    is_routed,
    normalize_url,
    parse_workers,
    plan,
    requests_in_flight,
    drain,
    drain_left,
)

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang_router', '0.3.2')
SMG = os.path.join(os.path.dirname(__file__), 'fixtures', 'smg', '1.13.0')


def smg_answer(name):
    with open(os.path.join(SMG, name)) as handle:
        return handle.read()


@pytest.fixture(scope='module')
def workers():
    with open(os.path.join(FIXTURES, 'workers.json')) as handle:
        return parse_workers(handle.read())


def test_workers_answer(workers):
    assert workers == [{'id': '775c82cc-aaa4-4cd8-8fe8-6d9e92e98aa6', 'url': 'http://127.0.0.1:18001',
                        'model_id': 'glm-5', 'is_healthy': True, 'load': 0, 'status': None,
                        'labels': {'dp_size': '1', 'model_path': 'x', 'tp_size': '1', 'served_model_name': 'glm-5'}}]
    assert is_routed(workers[0]) and not is_draining(workers[0])


def test_smg_workers_answer():
    worker, = parse_workers(smg_answer('workers.json'))
    assert dict((k, worker[k]) for k in ('id', 'url', 'model_id', 'is_healthy', 'load', 'status')) == {
        'id': '01a232fe-443f-725e-bbd5-55ceaf32b573', 'url': 'http://127.0.0.1:18001', 'model_id': 'fake-model',
        'is_healthy': True, 'load': 0, 'status': 'ready'}
    # smg's labels stand where sglang-router had its metadata.
    assert worker['labels']['served_model_name'] == 'fake-model' and worker['labels']['tp_size'] == '1'
    assert is_routed(worker)


def test_smg_lists_a_removed_worker_as_draining_until_it_is_gone():
    worker, = parse_workers(smg_answer('workers-draining.json'))
    assert worker['status'] == 'draining' and not worker['is_healthy']
    assert is_draining(worker) and not is_routed(worker)
    assert parse_workers('{"workers":[],"total":0,"stats":{}}') == []


@pytest.mark.parametrize('state, action', [('present', 'add'), ('absent', 'none')])
def test_a_draining_worker_is_on_its_way_out(state, action):
    decision = plan(parse_workers(smg_answer('workers-draining.json')), 'http://127.0.0.1:18101', state)
    assert decision['action'] == action and decision['draining']


@pytest.mark.parametrize('status, name, expected', [
    (202, 'add-accepted.json', {'worker_id': '01a232fe-443f-725e-bbd5-55ceaf32b573', 'already': None}),
    (409, 'add-already-listed.json', {'worker_id': '01a232fe-443f-725e-bbd5-55ceaf32b573', 'already': 'listed'}),
    (409, 'add-already-adding.json', {'worker_id': '01a2331e-d20c-7292-88f5-87881ce043eb', 'already': 'adding'}),
])
def test_smg_add_answers(status, name, expected):
    assert add_answer(status, smg_answer(name)) == expected


def test_an_add_smg_refuses_is_said_in_its_words():
    with pytest.raises(SglangRouterWorkersError, match='400: .*must start with a lowercase http://'):
        add_answer(400, smg_answer('add-bad-scheme.json'))
    with pytest.raises(SglangRouterWorkersError, match='409'):
        add_answer(409, '{"error": "something else", "code": "CONFLICT"}')


def test_sglang_router_answers_a_repeated_add_with_202():
    # 0.3.2 (live transcript): the same worker_id again, no "already".
    body = ('{"status":"accepted","worker_id":"e2ca346c-ef88-465e-8207-52856eff6c56","url":"http://127.0.0.1:18002",'
            '"location":"/workers/e2ca346c-ef88-465e-8207-52856eff6c56","message":"Worker addition queued for '
            'background processing"}')
    assert add_answer(202, body) == {'worker_id': 'e2ca346c-ef88-465e-8207-52856eff6c56', 'already': None}


@pytest.mark.parametrize('url, sent', [
    ('HTTP://127.0.0.1:18001/', 'http://127.0.0.1:18001'),
    ('http://10.0.0.11:8000', 'http://10.0.0.11:8000'),
    ('https://Node-1.example:8443//', 'https://node-1.example:8443'),
    ('http://[fd00::11]:8000/', 'http://[fd00::11]:8000'),
])
def test_the_url_is_sent_as_smg_accepts_and_matches_it(url, sent):
    assert normalize_url(url) == sent
    assert add_request(url)['url'] == sent


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
    assert add_request('http://w:8000/', 'k') == {'url': 'http://w:8000', 'api_key': 'k'}


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


@pytest.mark.parametrize('in_flight, last_error, words', [
    ({'running': 1, 'queued': 0}, '',
     'it is out of the router, but 1 requests are still running and 0 queued after 15 s'),
    (None, '<urlopen error timed out>', 'its /metrics did not answer within 15 s: <urlopen error timed out>'),
    (None, 'status 503', 'its /metrics did not answer within 15 s: status 503'),
])
def test_a_drain_that_did_not_end_says_what_it_left(in_flight, last_error, words):
    assert drain_left(in_flight, 15, last_error) == words


class _Clock:
    """Time that passes only when the drain sleeps or a read takes it."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _metrics(running, queued):
    return SGLANG_METRICS.replace('} 1.0', '} %d.0' % queued).replace('} 2.0', '} 0.0').replace(
        '} 3.0', '} %d.0' % running)


def test_a_drain_waits_until_the_requests_finish():
    clock = _Clock()
    answers = [(200, _metrics(2, 1), None), (200, _metrics(1, 0), None), (200, _metrics(0, 0), None)]
    result = drain(lambda: (200, 'OK', None), lambda: answers.pop(0), 30, 2, clock, clock.sleep)
    assert result == {'answered': True, 'drained': True, 'in_flight': {'running': 0, 'queued': 0}, 'reads': 3,
                      'left': ''}
    assert clock.now == 1004.0


def test_a_drain_ends_at_its_bound_however_long_each_read_takes():
    clock = _Clock()

    def slow_read():
        clock.now += 7
        return 200, _metrics(1, 0), None
    result = drain(lambda: (200, 'OK', None), slow_read, 15, 2, clock, clock.sleep)
    assert not result['drained'] and result['reads'] == 2 and clock.now == 1016
    assert result['left'] == 'it is out of the router, but 1 requests are still running and 0 queued after 15 s'


def test_a_server_that_does_not_answer_its_health_holds_nothing_to_drain():
    reads = []
    result = drain(lambda: (None, '', 'connection refused'), lambda: reads.append(1), 15, 2, _Clock(), None)
    assert result['drained'] and not result['answered'] and result['reads'] == 0 and reads == []


@pytest.mark.parametrize('answer, left', [
    ((503, '', 'status 503'), 'its /metrics did not answer within 4 s: status 503'),
    ((None, '', 'timed out'), 'its /metrics did not answer within 4 s: timed out'),
])
def test_a_metrics_that_does_not_answer_is_named_at_the_bound(answer, left):
    clock = _Clock()
    result = drain(lambda: (200, 'OK', None), lambda: answer, 4, 2, clock, clock.sleep)
    assert not result['drained'] and result['left'] == left and result['reads'] == 3


def test_a_server_without_the_gauges_ends_the_drain_at_once_saying_what_to_enable():
    result = drain(lambda: (200, 'OK', None), lambda: (200, '# nothing\n', None), 120, 2, _Clock(), None)
    assert not result['drained'] and result['reads'] == 1 and '--enable-metrics' in result['left']


@pytest.mark.parametrize('address, port, url', [
    ('10.0.0.11', 8000, 'http://10.0.0.11:8000'),
    ('gpu-node-1.lab', '30000', 'http://gpu-node-1.lab:30000'),
    ('fd00::11', 8000, 'http://[fd00::11]:8000'),
    ('[fd00::11]', 8000, 'http://[fd00::11]:8000'),
    ('10.0.0.11', None, ''),
    ('10.0.0.11', '', ''),
])
def test_the_url_a_router_reaches_a_node_at(address, port, url):
    from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_workers import worker_url
    assert worker_url(address, port) == url
