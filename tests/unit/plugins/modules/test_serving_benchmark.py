# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.inferops.serving.plugins.modules import serving_benchmark
from ansible_collections.inferops.serving.tests.utils.module_result import run_in_process


class _Server(BaseHTTPRequestHandler):
    """Streams like the lab's simulated SGLang: SSE lines, then the connection closes."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        # Slow enough for the 10 ms GPU sampler to take readings while requests run.
        time.sleep(0.1)
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.send_header('Connection', 'close')
        self.end_headers()
        for _token in range(body['max_tokens']):
            self.wfile.write(b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n')
        self.wfile.write(b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": %d}}\n\n'
                         % body['max_tokens'])
        self.wfile.write(b'data: [DONE]\n\n')


@pytest.fixture
def server_url():
    server = ThreadingHTTPServer(('127.0.0.1', 0), _Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    script = tmp_path / 'nvidia-smi'
    script.write_text('#!/bin/sh\nprintf "250.00, 35, 600.00\\n125.00, 15, 600.00\\n"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv('PATH', '%s%s%s' % (tmp_path, os.pathsep, os.environ.get('PATH', '')))


def run(args, capsys):
    return run_in_process(serving_benchmark.main, args, capsys)


def test_builtin_benchmark_reports_throughput_and_gpu_power(server_url, fake_nvidia_smi, capsys):
    result = run({'base_url': server_url, 'model': 'glm-5', 'num_prompts': 8, 'concurrency': 2,
                  'input_len': 4, 'output_len': 5, 'sample_interval': 0.01}, capsys)
    bench = result['benchmark']
    assert result['changed'] is False
    assert bench['completed'] == 8 and bench['total_output_tokens'] == 40
    assert bench['output_throughput'] > 0
    assert (bench['mode'], bench['concurrency'], bench['output_len']) == ('builtin', 2, 5)
    assert bench['gpu']['samples'] > 0
    assert bench['gpu']['mean_power_w'] == 187.5
    assert bench['gpu']['power_limit_w'] == 600.0
    assert [g['mean_power_w'] for g in bench['gpu']['gpus']] == [250.0, 125.0]


def test_check_mode_sends_no_load(capsys):
    result = run({'base_url': 'http://127.0.0.1:9', 'model': 'glm-5', '_ansible_check_mode': True}, capsys)
    assert result['skipped'] is True and 'benchmark' not in result


def test_a_server_that_answers_nothing_fails_with_the_reason(capsys):
    result = run({'base_url': 'http://127.0.0.1:9', 'model': 'glm-5', 'num_prompts': 1, 'sample_gpus': False,
                  'request_timeout': 2}, capsys)
    assert result['failed'] and 'no benchmark request succeeded' in result['msg']
    assert 'ConnectionRefusedError' in result['msg']


@pytest.mark.parametrize('option', ['num_prompts', 'concurrency', 'output_len'])
def test_sizes_below_one_are_refused(option, capsys):
    result = run({'model': 'glm-5', option: 0}, capsys)
    assert result['failed'] and ('%s must be at least 1' % option) in result['msg']


def test_sglang_mode_needs_the_venv(tmp_path, capsys):
    result = run({'mode': 'sglang', 'model': 'glm-5', 'python': str(tmp_path / 'missing' / 'python'),
                  'sample_gpus': False}, capsys)
    assert result['failed'] and 'mode=builtin' in result['msg']


def test_repeats_report_the_spread_and_tokens_per_joule(server_url, fake_nvidia_smi, capsys):
    result = run({'base_url': server_url, 'model': 'glm-5', 'num_prompts': 4, 'concurrency': 2,
                  'input_len': 4, 'output_len': 5, 'sample_interval': 0.01, 'repeats': 3}, capsys)
    bench = result['benchmark']
    assert bench['repeats'] == 3 and len(bench['runs']) == 3 and bench['completed'] == 12
    spread = bench['spread']['output_throughput']
    assert spread['n'] == 3 and spread['stdev'] is not None and spread['min'] <= spread['mean'] <= spread['max']
    # 375 W over both GPUs.
    assert bench['tokens_per_joule'] == pytest.approx(bench['output_throughput'] / 375.0, rel=0.05)
    assert all(r['mean_power_w'] == 187.5 for r in bench['runs'])


FIXTURES = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'fixtures', 'serving_benchmark')


@pytest.mark.parametrize('release, files, bench_module, output', [
    ('0.5.9', ['sglang/bench_serving.py'], 'sglang.bench_serving', 'bench_serving_0.5.9_cpu_stub.jsonl'),
    ('0.5.23', ['sglang/bench_serving.py', 'sglang/benchmark/serving.py'], 'sglang.benchmark.serving',
     'benchmark_serving_0.5.23_cpu_stub.jsonl'),
])
def test_sglang_mode_runs_the_benchmark_the_installed_release_has(tmp_path, capsys, release, files, bench_module,
                                                                  output):
    # An interpreter that reports a site-packages holding the release's files, and as the benchmark
    # writes that release's real output row.
    site = tmp_path / 'venv' / 'lib' / 'python3.11' / 'site-packages'
    for name in files:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text('')
    started = tmp_path / 'started'
    python = tmp_path / 'venv' / 'python'
    python.write_text('#!%s\nimport json, shutil, sys\n'
                      'if sys.argv[1] == "-c":\n'
                      '    print(json.dumps([%r, %r]))\n'
                      '    sys.exit(0)\n'
                      'open(%r, "w").write(" ".join(sys.argv[1:3]))\n'
                      'shutil.copy(%r, sys.argv[sys.argv.index("--output-file") + 1])\n'
                      % (sys.executable, str(site), str(site), str(started), os.path.join(FIXTURES, output)))
    python.chmod(0o755)
    result = run({'mode': 'sglang', 'model': 'glm-5', 'python': str(python), 'sample_gpus': False,
                  'base_url': 'http://127.0.0.1:8000'}, capsys)
    assert started.read_text() == '-m ' + bench_module
    with open(os.path.join(FIXTURES, output)) as handle:
        row = json.loads(handle.read())
    assert result['benchmark']['output_throughput'] == pytest.approx(row['output_throughput'], rel=1e-3)
    assert result['benchmark']['completed'] == 4


def test_sglang_mode_without_the_benchmark_in_the_venv_says_so(tmp_path, capsys):
    python = tmp_path / 'python'
    python.write_text('#!%s\nimport json\nprint(json.dumps([%r]))\n' % (sys.executable, str(tmp_path)))
    python.chmod(0o755)
    result = run({'mode': 'sglang', 'model': 'glm-5', 'python': str(python), 'sample_gpus': False}, capsys)
    assert result['failed'] and 'no SGLang serving benchmark' in result['msg']
