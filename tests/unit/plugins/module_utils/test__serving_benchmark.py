# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import ast
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._serving_benchmark import (
    NVIDIA_SMI_QUERY,
    GpuSampler,
    ServingBenchmarkError,
    bench_serving_argv,
    bench_serving_module,
    build_prompt,
    measure_stream,
    parse_bench_serving_jsonl,
    parse_gpu_sample,
    parse_stream_event,
    run_chat_benchmark,
    summarize_gpu_samples,
    summarize_repeats,
    summarize_requests,
)
from ansible_collections.inferops.serving.plugins.module_utils._benchmark_summary import summary

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'serving_benchmark')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# The module of each release that writes the --output-file rows, and the release whose rows each
# fixture holds (README.md there says how each was made).
BENCHMARK_SOURCES = {'0.5.9': 'sglang/bench_serving.py', '0.5.23': 'sglang/benchmark/serving.py'}
BENCH_SERVING_FIXTURES = {'bench_serving_two_runs.jsonl': '0.5.9', 'bench_serving_0.5.9_cpu_stub.jsonl': '0.5.9',
                          'benchmark_serving_0.5.23_cpu_stub.jsonl': '0.5.23'}


def output_row_keys(source):
    """The keys, in order, of the row a benchmark writes (without --output-details, goodput or
    --cache-report): those of the dict literal it assigns to ``result``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and [getattr(target, 'id', None) for target in node.targets] == ['result'] \
                and isinstance(node.value, ast.Dict):
            keys = [key.value for key in node.value.keys if isinstance(key, ast.Constant)]
            if 'completed' in keys and 'output_throughput' in keys:
                return keys
    raise AssertionError('the benchmark source builds no result row')


def test_every_bench_serving_fixture_row_has_the_keys_of_the_real_release(sglang_wheel_file):
    assert sorted(name for name in os.listdir(FIXTURES) if name.endswith('.jsonl')) == sorted(BENCH_SERVING_FIXTURES)
    for name, version in sorted(BENCH_SERVING_FIXTURES.items()):
        keys = output_row_keys(sglang_wheel_file(version, BENCHMARK_SOURCES[version]))
        assert len(keys) == {'0.5.9': 43, '0.5.23': 49}[version]
        rows = [json.loads(line) for line in fixture(name).splitlines()]
        assert rows and all(list(row) == keys for row in rows), (name, version)


def test_summarize_counts_only_successful_requests():
    requests = [
        {'ok': True, 'ttft_s': 0.1, 'latency_s': 1.1, 'output_tokens': 101, 'prompt_tokens': 50},
        {'ok': True, 'ttft_s': 0.3, 'latency_s': 2.3, 'output_tokens': 101, 'prompt_tokens': 50},
        {'ok': False, 'error': 'HTTP 503 starting'},
    ]
    summary = summarize_requests(requests, duration_s=2.0)
    assert summary['completed'] == 2
    assert summary['failed'] == 1
    assert summary['errors'] == ['HTTP 503 starting']
    assert summary['output_throughput'] == pytest.approx(101.0)
    assert summary['total_throughput'] == pytest.approx(151.0)
    assert summary['median_ttft_ms'] == pytest.approx(200.0)
    # TPOT excludes the first token: (1.1 - 0.1) / 100 and (2.3 - 0.3) / 100.
    assert summary['median_tpot_ms'] == pytest.approx(15.0)


def test_summarize_refuses_a_zero_duration():
    with pytest.raises(ServingBenchmarkError, match='duration'):
        summarize_requests([], 0)


def test_bench_serving_output_uses_the_newest_run():
    metrics = parse_bench_serving_jsonl(fixture('bench_serving_two_runs.jsonl'))
    assert metrics['output_throughput'] == 236.0
    assert metrics['total_throughput'] == 472.0
    assert metrics['median_ttft_ms'] == 8911.0
    assert metrics['median_tpot_ms'] == 260.9
    assert metrics['completed'] == 512
    assert metrics['duration_s'] == 2221.6


@pytest.mark.parametrize('text, message', [
    ('', 'no run'),
    ('{"backend": "sglang"}\n', 'no run'),
    ('not json\n', 'line 1 is not JSON'),
])
def test_bench_serving_output_without_a_run_is_an_error(text, message):
    with pytest.raises(ServingBenchmarkError, match=message):
        parse_bench_serving_jsonl(text)


def test_gpu_sample_of_a_loaded_node():
    gpus = parse_gpu_sample(fixture('nvidia_smi_8gpu_loaded.csv'))
    assert len(gpus) == 8
    assert gpus[0] == {'power_w': 250.12, 'util_pct': 35.0, 'power_limit_w': 600.0}


def test_gpu_sample_tolerates_sensors_a_vm_hides():
    gpus = parse_gpu_sample(fixture('nvidia_smi_vm_na.csv'))
    assert gpus[0]['power_w'] is None and gpus[0]['power_limit_w'] is None
    assert gpus[1]['util_pct'] is None and gpus[1]['power_w'] == 31.2


@pytest.mark.parametrize('text', ['250, 35\n', '250, busy, 600\n'])
def test_gpu_sample_rejects_unexpected_columns(text):
    with pytest.raises(ServingBenchmarkError):
        parse_gpu_sample(text)


def test_gpu_summary_reports_the_seed_signal():
    loaded = parse_gpu_sample(fixture('nvidia_smi_8gpu_loaded.csv'))
    idle = [dict(g, power_w=g['power_w'] - 10) for g in loaded]
    summary = summarize_gpu_samples([loaded, idle])
    assert summary['samples'] == 2
    assert len(summary['gpus']) == 8
    assert 240 < summary['mean_power_w'] < 250
    assert summary['max_power_w'] == 252.4
    assert summary['power_limit_w'] == 600.0
    assert summary['power_fraction'] == pytest.approx(summary['mean_power_w'] / 600.0, abs=1e-3)


def test_gpu_summary_of_no_samples_is_explicitly_empty():
    summary = summarize_gpu_samples([])
    assert summary['samples'] == 0 and summary['mean_power_w'] is None


def test_gpu_sampler_keeps_sampling_after_a_failed_reading():
    readings = iter(['boom', fixture('nvidia_smi_8gpu_loaded.csv')])
    done = threading.Event()

    def read():
        text = next(readings, None)
        if text is None:
            done.set()
            return fixture('nvidia_smi_8gpu_loaded.csv')
        if text == 'boom':
            raise ServingBenchmarkError('nvidia-smi exited 9')
        return text

    with GpuSampler(read, interval_s=0.01) as sampler:
        done.wait(5)
    summary = sampler.summary()
    assert summary['samples'] >= 1
    assert summary['sample_errors'] == ['nvidia-smi exited 9']


@pytest.mark.parametrize('line, expected', [
    (b'data: [DONE]\n', 'DONE'),
    (': keep-alive\n', None),
    ('\n', None),
    ('data: {"choices": []}', {'choices': []}),
])
def test_parse_stream_event(line, expected):
    assert parse_stream_event(line) == expected


def test_stream_measure_prefers_usage_and_times_first_token():
    ticks = iter([1.5, 3.0])
    lines = [
        'data: {"choices": [{"delta": {"role": "assistant"}}]}',
        'data: {"choices": [{"delta": {"reasoning_content": "Let"}}]}',
        'data: {"choices": [{"delta": {"content": " me"}}]}',
        'data: {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 40}}',
        'data: [DONE]',
    ]
    result = measure_stream(lines, started=1.0, clock=lambda: next(ticks))
    assert result['ttft_s'] == pytest.approx(0.5)
    assert result['latency_s'] == pytest.approx(2.0)
    assert result['output_tokens'] == 40
    assert result['prompt_tokens'] == 12


def test_stream_measure_counts_chunks_without_usage():
    lines = ['data: {"choices": [{"delta": {"content": "a"}}]}'] * 3 + ['data: [DONE]']
    assert measure_stream(lines, started=0.0)['output_tokens'] == 3


def test_stream_error_is_reported():
    with pytest.raises(ServingBenchmarkError, match='out of memory'):
        measure_stream(['data: {"error": {"message": "out of memory"}}'], started=0.0)


def test_prompts_are_deterministic_and_sized():
    assert build_prompt(3, 16) == build_prompt(3, 16)
    assert build_prompt(3, 16) != build_prompt(4, 16)
    assert len(build_prompt(0, 16).split()) == 16


def test_bench_serving_command_uses_random_ids_and_the_chat_backend():
    argv = bench_serving_argv('/opt/sglang/venv/bin/python', 'sglang.benchmark.serving', '127.0.0.1', 8000,
                              'lukealonso/GLM-5-NVFP4', 'glm-5', 512, 64, 1024, 1024, '/tmp/x/bench.jsonl')
    joined = ' '.join(argv)
    assert argv[:3] == ['/opt/sglang/venv/bin/python', '-m', 'sglang.benchmark.serving']
    assert '--dataset-name random-ids' in joined
    assert '--backend sglang-oai-chat' in joined
    assert '--max-concurrency 64' in joined
    assert '--output-file /tmp/x/bench.jsonl' in joined


# The files each release's wheel holds: 0.5.9 only sglang/bench_serving.py; 0.5.23 the package
# sglang/benchmark/ and, beside it, sglang/bench_serving.py as a deprecated shim.
@pytest.mark.parametrize('files, expected', [
    (['sglang/__init__.py', 'sglang/bench_serving.py'], 'sglang.bench_serving'),
    (['sglang/__init__.py', 'sglang/bench_serving.py', 'sglang/benchmark/__init__.py',
      'sglang/benchmark/serving.py'], 'sglang.benchmark.serving'),
], ids=['0.5.9', '0.5.23'])
def test_the_benchmark_module_is_the_one_the_installed_release_has(tmp_path, files, expected):
    purelib, platlib = tmp_path / 'lib' / 'site-packages', tmp_path / 'lib64' / 'site-packages'
    platlib.mkdir(parents=True)
    for name in files:
        (purelib / name).parent.mkdir(parents=True, exist_ok=True)
        (purelib / name).write_text('')
    assert bench_serving_module([str(platlib), str(purelib)]) == expected


def test_a_venv_without_the_benchmark_is_an_error(tmp_path):
    with pytest.raises(ServingBenchmarkError, match='no SGLang serving benchmark .*sglang/bench_serving.py'):
        bench_serving_module([str(tmp_path)])


# Real --output-file rows of both releases' benchmarks (fixtures/serving_benchmark/README.md):
# 4 requests of 8 input and 4 output tokens, so the token totals are known.
@pytest.mark.parametrize('name', ['bench_serving_0.5.9_cpu_stub.jsonl', 'benchmark_serving_0.5.23_cpu_stub.jsonl'])
def test_the_output_of_each_releases_benchmark_is_read(name):
    metrics = parse_bench_serving_jsonl(fixture(name))
    assert sorted(metrics) == ['completed', 'duration_s', 'median_tpot_ms', 'median_ttft_ms', 'output_throughput',
                               'p99_tpot_ms', 'p99_ttft_ms', 'total_input_tokens', 'total_output_tokens',
                               'total_throughput']
    assert (metrics['completed'], metrics['total_input_tokens'], metrics['total_output_tokens']) == (4, 32, 16)
    assert metrics['output_throughput'] == pytest.approx(16 / metrics['duration_s'])
    assert 0 < metrics['median_ttft_ms'] <= metrics['p99_ttft_ms']


class _StubChatServer(BaseHTTPRequestHandler):
    """A loopback OpenAI chat endpoint that streams ``max_tokens`` one-token chunks."""

    protocol_version = 'HTTP/1.1'
    seen = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        self.seen.append({'auth': self.headers.get('Authorization'), 'body': body, 'path': self.path})
        if self.headers.get('Authorization') != 'Bearer sk-lab':
            self.send_response(401)
            self.send_header('Content-Length', '12')
            self.end_headers()
            self.wfile.write(b'unauthorized')
            return
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()

        def send(payload):
            data = ('data: %s\n\n' % payload).encode()
            self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))

        for _token in range(body['max_tokens']):
            send(json.dumps({'choices': [{'delta': {'content': 'x'}}]}))
        send(json.dumps({'choices': [], 'usage': {'prompt_tokens': 7,
                                                  'completion_tokens': body['max_tokens']}}))
        send('[DONE]')
        self.wfile.write(b'0\r\n\r\n')


@pytest.fixture
def stub_server():
    _StubChatServer.seen = []
    server = ThreadingHTTPServer(('127.0.0.1', 0), _StubChatServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_client_streams_every_request_against_a_loopback_server(stub_server):
    results, duration = run_chat_benchmark(stub_server, 'glm-5', num_prompts=12, concurrency=4,
                                           input_words=8, max_tokens=5, api_key='sk-lab')
    summary = summarize_requests(results, duration)
    assert summary['completed'] == 12 and summary['failed'] == 0
    assert summary['total_output_tokens'] == 60
    assert summary['total_input_tokens'] == 84
    assert summary['output_throughput'] > 0
    assert summary['median_ttft_ms'] is not None
    request = _StubChatServer.seen[0]
    assert request['path'] == '/v1/chat/completions'
    assert request['body']['stream'] is True
    assert request['body']['stream_options'] == {'include_usage': True}
    assert request['body']['model'] == 'glm-5'


def test_client_reports_refused_requests_as_failures(stub_server):
    results, duration = run_chat_benchmark(stub_server, 'glm-5', num_prompts=3, concurrency=2,
                                           input_words=4, max_tokens=2, api_key='wrong')
    summary = summarize_requests(results, duration)
    assert summary['completed'] == 0 and summary['failed'] == 3
    assert summary['errors'] == ['HTTP 401 unauthorized']


def test_client_reports_an_unreachable_server():
    results, _duration = run_chat_benchmark('http://127.0.0.1:9', 'glm-5', num_prompts=2, concurrency=1,
                                            input_words=4, max_tokens=2, request_timeout_s=2)
    assert [r['ok'] for r in results] == [False, False]
    assert 'ConnectionRefusedError' in results[0]['error']


def test_client_starts_no_request_after_the_time_limit(stub_server):
    results, _duration = run_chat_benchmark(stub_server, 'glm-5', num_prompts=50, concurrency=2,
                                            input_words=4, max_tokens=2, api_key='sk-lab', time_limit_s=0)
    assert results == []


@pytest.mark.parametrize('url', ['127.0.0.1:8000', 'ftp://x', 'http://'])
def test_client_rejects_a_url_it_cannot_use(url):
    with pytest.raises(ServingBenchmarkError, match='base URL'):
        run_chat_benchmark(url, 'glm-5', 1, 1, 1, 1)


def test_gpu_samples_of_a_real_h200_idle_and_under_a_matrix_product_load():
    # What `nvidia-smi` printed for NVIDIA_SMI_QUERY on a one-GPU H200 (driver 580.159.04).
    assert NVIDIA_SMI_QUERY == ['--query-gpu=power.draw,utilization.gpu,power.limit', '--format=csv,noheader,nounits']
    idle = parse_gpu_sample(fixture('h200-2026-12-03/power_idle.csv'))
    loaded = parse_gpu_sample(fixture('h200-2026-12-03/power_load_3.csv'))
    assert idle == [{'power_w': 125.3, 'util_pct': 0.0, 'power_limit_w': 700.0}]
    assert loaded == [{'power_w': 370.24, 'util_pct': 99.0, 'power_limit_w': 700.0}]
    summary = summarize_gpu_samples([idle, loaded])
    assert summary['samples'] == 2 and summary['power_limit_w'] == 700.0
    assert summary['mean_power_w'] == 247.8 and summary['max_power_w'] == 370.2
    assert summary['mean_util_pct'] == 49.5 and summary['power_fraction'] == 0.354


def _run(throughput, power_w):
    return {'output_throughput': throughput, 'completed': 64, 'median_ttft_ms': 80.0, 'median_tpot_ms': 12.5,
            'gpu': {'mean_power_w': power_w, 'power_limit_w': 600.0}}


def test_the_summary_of_repeated_runs_gives_the_spread_and_the_power():
    line = summary(summarize_repeats([_run(1800.0, 400.0), _run(1900.0, 400.0), _run(2000.0, 400.0)]))
    assert line.startswith('1900.0 output tok/s +/- 100.0 over 3 runs (min 1800.0, max 2000.0, 95% CI +/- 248.434), ')
    assert line.endswith('n/a tok/J (192 requests, median TTFT 80.0 ms, median TPOT 12.5 ms, mean GPU power 400.0 W of 600.0 W)')


def test_the_summary_of_one_run_without_power_readings_says_n_a():
    line = summary({'output_throughput': 1867.0, 'completed': 200, 'median_ttft_ms': 95.1, 'median_tpot_ms': 14.2,
                    'spread': {'output_throughput': {'n': 1, 'stdev': None}}, 'tokens_per_joule': None, 'gpu': {}})
    assert line == ('1867.0 output tok/s, n/a tok/J (200 requests, median TTFT 95.1 ms, median TPOT 14.2 ms, '
                    'mean GPU power n/a W of n/a W)')
