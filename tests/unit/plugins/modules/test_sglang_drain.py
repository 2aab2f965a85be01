# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain module against a stand-in of an SGLang server whose requests finish while it reads."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

MODULE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'plugins', 'modules', 'sglang_drain.py')
KEY = 'sk-drain-0123456789'
PRIORITY_METRICS = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'fixtures', 'sglang_metrics',
                                '0.5.23_priority_scheduling.prom')


class _Server(BaseHTTPRequestHandler):
    """/health answers 200; /metrics (with the key) answers the next text of ``server.metrics``, the
    last one for good."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        server = self.server
        if self.path == '/health':
            status, body = server.health, b''
        elif self.headers.get('Authorization') != 'Bearer %s' % KEY:
            status, body = 401, b''
        else:
            server.reads += 1
            text = server.metrics.pop(0) if len(server.metrics) > 1 else server.metrics[0]
            status, body = 200, text.encode()
        self.send_response(status)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), _Server)
    httpd.health, httpd.reads = 200, 0
    with open(PRIORITY_METRICS) as handle:
        busy = handle.read()
    httpd.metrics = [busy, busy, 'sglang:num_running_reqs{model_name="m"} 0.0\nsglang:num_queue_reqs{model_name="m"} 0.0\n']
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.url = 'http://127.0.0.1:%d' % httpd.server_address[1]
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_the_drain_ends_once_the_server_holds_no_request(run_module, server):
    result = run_module(url=server.url, api_key=KEY, timeout=30, interval=1)
    assert result['drained'] and result['reads'] == 3 and server.reads == 3
    assert not result['changed'] and KEY not in str(result)


def test_requests_that_outlive_the_bound_are_named_without_failing_the_module(run_module, server):
    server.metrics = server.metrics[:1]
    result = run_module(url=server.url, api_key=KEY, timeout=2, interval=1)
    assert not result.get('failed') and not result['drained'] and result['reads'] >= 2
    assert result['left'] == 'it is out of the router, but 5 requests are still running and 1 queued after 2 s'


def test_a_wrong_key_is_a_metrics_that_does_not_answer(run_module, server):
    result = run_module(url=server.url, api_key='wrong', timeout=1, interval=1)
    assert result['left'] == 'its /metrics did not answer within 1 s: status 401'


def test_a_server_that_is_not_healthy_is_not_waited_for(run_module, server):
    server.health = 503
    result = run_module(url=server.url, api_key=KEY, timeout=30)
    assert result['drained'] and not result['answered'] and server.reads == 0


def test_check_mode_reads_nothing(run_module, server):
    result = run_module(url=server.url, api_key=KEY, timeout=30, _ansible_check_mode=True)
    assert result['drained'] and server.reads == 0


def test_an_interval_below_one_second_is_refused(run_module, server):
    result = run_module(url=server.url, timeout=30, interval=0)
    assert result['failed'] and 'interval 1 or more' in result['msg']
