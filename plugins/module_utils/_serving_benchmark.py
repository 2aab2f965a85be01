# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark an OpenAI-compatible SGLang server.

Everything here is plain Python (standard library only) so that it runs on a
node without the serving stack and can be tested against a loopback stub:

* a streaming chat-completions client at a fixed concurrency,
* the summary of a run (throughput, median/p99 TTFT and TPOT),
* parsers for the JSONL output of SGLang's serving benchmark (``sglang.bench_serving``,
  ``sglang.benchmark.serving`` from 0.5.23) and ``nvidia-smi`` CSV,
* a GPU sampler thread,
* repeated runs folded into one result, and tokens per joule.

The statistics themselves are in ``_statistics.py``; whether an experiment stays is decided
in ``_experiment.py``.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import threading
import time

try:
    import http.client as http_client
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 is not a supported target
    http_client = None
    urlsplit = None

from ansible_collections.inferops.serving.plugins.module_utils._statistics import (
    mean,
    percentile,
    rounded,
    spread,
)


NVIDIA_SMI_QUERY = ['--query-gpu=power.draw,utilization.gpu,power.limit', '--format=csv,noheader,nounits']

# Keys SGLang's serving benchmark writes per run into its --output-file (one JSON object per line),
# with the same names and units in 0.5.9's sglang.bench_serving and 0.5.23's sglang.benchmark.serving.
BENCH_SERVING_KEYS = ('output_throughput', 'total_throughput', 'median_ttft_ms', 'median_tpot_ms',
                      'p99_ttft_ms', 'p99_tpot_ms', 'completed', 'duration')

# Words, not random bytes: every tokenizer turns them into roughly one token each, so the
# requested input length stays meaningful whatever model the server runs.
_PROMPT_WORDS = ('alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india',
                 'juliet', 'kilo', 'lima', 'mike', 'november', 'oscar', 'papa', 'quebec', 'romeo',
                 'sierra', 'tango', 'uniform', 'victor', 'whiskey', 'xray', 'yankee', 'zulu')


class ServingBenchmarkError(Exception):
    """Input or output the benchmark cannot work with."""


def summarize_requests(requests, duration_s):
    """Aggregate per-request measurements into the numbers operators compare.

    ``requests`` is a list of dicts with ``ok``, ``ttft_s``, ``latency_s``,
    ``prompt_tokens`` and ``output_tokens``. Throughput counts successful
    requests only, over the wall-clock duration of the whole run.
    """
    if duration_s is None or duration_s <= 0:
        raise ServingBenchmarkError('benchmark duration must be positive, got %r' % (duration_s,))
    done = [r for r in requests if r.get('ok')]
    output_tokens = sum(r.get('output_tokens') or 0 for r in done)
    prompt_tokens = sum(r.get('prompt_tokens') or 0 for r in done)
    ttfts_ms = [r['ttft_s'] * 1000.0 for r in done if r.get('ttft_s') is not None]
    tpots_ms = []
    for r in done:
        tokens = r.get('output_tokens') or 0
        if tokens > 1 and r.get('ttft_s') is not None:
            tpots_ms.append((r['latency_s'] - r['ttft_s']) * 1000.0 / (tokens - 1))
    errors = sorted(set(r.get('error') for r in requests if not r.get('ok') and r.get('error')))
    return {
        'completed': len(done),
        'failed': len(requests) - len(done),
        'errors': errors[:5],
        'duration_s': rounded(duration_s, 3),
        'total_input_tokens': prompt_tokens,
        'total_output_tokens': output_tokens,
        'output_throughput': rounded(output_tokens / duration_s),
        'total_throughput': rounded((output_tokens + prompt_tokens) / duration_s),
        'median_ttft_ms': rounded(percentile(ttfts_ms, 50)),
        'p99_ttft_ms': rounded(percentile(ttfts_ms, 99)),
        'median_tpot_ms': rounded(percentile(tpots_ms, 50)),
        'p99_tpot_ms': rounded(percentile(tpots_ms, 99)),
    }


def parse_bench_serving_jsonl(text):
    """Return the metrics of the last run recorded in the output file of SGLang's serving benchmark.

    bench_serving appends one JSON object per run, so the newest run is the last
    line that parses and carries ``output_throughput``.
    """
    last = None
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ServingBenchmarkError('bench_serving output line %d is not JSON: %s' % (number, exc))
        if isinstance(row, dict) and 'output_throughput' in row:
            last = row
    if last is None:
        raise ServingBenchmarkError('bench_serving output holds no run with output_throughput')
    metrics = dict((key, last.get(key)) for key in BENCH_SERVING_KEYS if key in last)
    if 'duration' in metrics:
        metrics['duration_s'] = metrics.pop('duration')
    for key in ('total_input_tokens', 'total_output_tokens'):
        if key in last:
            metrics[key] = last[key]
    return metrics


def _csv_number(field):
    field = field.strip()
    # nvidia-smi prints "[N/A]" or "[Not Supported]" for sensors a GPU or VM does not expose.
    if not field or field.startswith('['):
        return None
    try:
        return float(field)
    except ValueError:
        raise ServingBenchmarkError('nvidia-smi printed %r where a number was expected' % (field,))


def parse_gpu_sample(text):
    """Parse one ``nvidia-smi --query-gpu=power.draw,utilization.gpu,power.limit`` CSV reading.

    Returns one dict per GPU, in nvidia-smi's order (which is the GPU index).
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(',')
        if len(fields) != 3:
            raise ServingBenchmarkError('nvidia-smi line %r does not have power.draw, utilization.gpu '
                                        'and power.limit' % (line,))
        power, util, limit = [_csv_number(f) for f in fields]
        gpus.append({'power_w': power, 'util_pct': util, 'power_limit_w': limit})
    return gpus


def summarize_gpu_samples(samples):
    """Reduce a list of ``parse_gpu_sample`` readings to per-GPU and overall power/utilisation."""
    samples = [s for s in samples if s]
    if not samples:
        return {'samples': 0, 'gpus': [], 'mean_power_w': None, 'max_power_w': None,
                'power_limit_w': None, 'mean_util_pct': None, 'power_fraction': None}
    gpu_count = max(len(s) for s in samples)
    per_gpu = []
    for index in range(gpu_count):
        readings = [s[index] for s in samples if index < len(s)]
        powers = [r['power_w'] for r in readings if r['power_w'] is not None]
        per_gpu.append({
            'index': index,
            'mean_power_w': rounded(mean(powers), 1),
            'max_power_w': rounded(max(powers), 1) if powers else None,
            'mean_util_pct': rounded(mean([r['util_pct'] for r in readings]), 1),
            'power_limit_w': rounded(mean([r['power_limit_w'] for r in readings]), 1),
        })
    mean_power = mean([g['mean_power_w'] for g in per_gpu])
    limit = mean([g['power_limit_w'] for g in per_gpu])
    maxima = [g['max_power_w'] for g in per_gpu if g['max_power_w'] is not None]
    return {
        'samples': len(samples),
        'gpus': per_gpu,
        'mean_power_w': rounded(mean_power, 1),
        'max_power_w': max(maxima) if maxima else None,
        'power_limit_w': rounded(limit, 1),
        'mean_util_pct': rounded(mean([g['mean_util_pct'] for g in per_gpu]), 1),
        # The seed's signal: 250 W of 600 W means the GPUs wait on the interconnect.
        'power_fraction': rounded(mean_power / limit, 3) if mean_power is not None and limit else None,
    }


class GpuSampler(object):
    """Read nvidia-smi every ``interval_s`` in a background thread while a benchmark runs.

    ``read`` is a callable returning the CSV text of one reading (the module passes a
    run_command wrapper); a failing reading is counted, not fatal, because a
    benchmark without power numbers is still a benchmark.
    """

    def __init__(self, read, interval_s=1.0):
        self._read = read
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = None
        self.samples = []
        self.errors = []

    def _loop(self):
        # Wait first: a reading at the very start (or after the end) sees idle GPUs and
        # would drag the mean toward idle power on a short run.
        while not self._stop.wait(self._interval_s):
            try:
                self.samples.append(parse_gpu_sample(self._read()))
            except Exception as exc:  # a sensor hiccup must not abort the benchmark
                self.errors.append(str(exc))

    def __enter__(self):
        self._thread = threading.Thread(target=self._loop, name='gpu-sampler')
        self._thread.daemon = True
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join(timeout=30)
        return False

    def summary(self):
        result = summarize_gpu_samples(self.samples)
        result['sample_errors'] = self.errors[:3]
        return result


def build_prompt(index, input_words):
    """A deterministic prompt of ``input_words`` words, distinct per request index."""
    if input_words < 1:
        raise ServingBenchmarkError('input length must be at least 1, got %r' % (input_words,))
    words = [_PROMPT_WORDS[(index * 7 + i) % len(_PROMPT_WORDS)] for i in range(input_words)]
    return ' '.join(words)


def chat_request_body(model, prompt, max_tokens):
    return {
        'model': model,
        'messages': [{'role': 'user', 'content': prompt}],
        'max_tokens': max_tokens,
        'temperature': 0,
        # A fixed output length keeps runs comparable: the same work before and after a change.
        'ignore_eos': True,
        'stream': True,
        'stream_options': {'include_usage': True},
    }


def parse_stream_event(line):
    """Decode one server-sent-events line of a streaming chat completion.

    Returns None for lines that carry no data, the string 'DONE' for the end
    marker, else the decoded chunk.
    """
    if isinstance(line, bytes):
        line = line.decode('utf-8', 'replace')
    line = line.strip()
    if not line.startswith('data:'):
        return None
    payload = line[len('data:'):].strip()
    if payload == '[DONE]':
        return 'DONE'
    try:
        return json.loads(payload)
    except ValueError:
        raise ServingBenchmarkError('server sent a stream chunk that is not JSON: %r' % (payload[:200],))


def _chunk_has_token(chunk):
    for choice in chunk.get('choices') or []:
        delta = choice.get('delta') or {}
        # Reasoning models (glm45 parser) stream their first tokens as reasoning_content.
        if delta.get('content') or delta.get('reasoning_content'):
            return True
    return False


def measure_stream(lines, started, clock=time.monotonic):
    """Time a streaming response: first-token time, end time and token counts.

    ``lines`` yields SSE lines as they arrive; ``started`` is the clock value at
    send time. The usage chunk is preferred for token counts; without it each
    content chunk counts as one token.
    """
    ttft = None
    chunks_with_tokens = 0
    usage = None
    for line in lines:
        event = parse_stream_event(line)
        if event is None:
            continue
        if event == 'DONE':
            break
        if event.get('error'):
            raise ServingBenchmarkError('server reported an error: %s' % (event['error'],))
        if _chunk_has_token(event):
            chunks_with_tokens += 1
            if ttft is None:
                ttft = clock() - started
        if event.get('usage'):
            usage = event['usage']
    latency = clock() - started
    output_tokens = (usage or {}).get('completion_tokens')
    if output_tokens is None:
        output_tokens = chunks_with_tokens
    return {
        'ttft_s': ttft,
        'latency_s': latency,
        'output_tokens': output_tokens,
        'prompt_tokens': (usage or {}).get('prompt_tokens') or 0,
    }


def _split_base_url(base_url):
    parts = urlsplit(base_url)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise ServingBenchmarkError('base URL must look like http://127.0.0.1:8000, got %r' % (base_url,))
    port = parts.port or (443 if parts.scheme == 'https' else 80)
    return parts.scheme, parts.hostname, port, parts.path.rstrip('/')


def _one_request(scheme, host, port, path, headers, body, timeout_s):
    conn_class = http_client.HTTPSConnection if scheme == 'https' else http_client.HTTPConnection
    conn = conn_class(host, port, timeout=timeout_s)
    started = time.monotonic()
    try:
        conn.request('POST', path, body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        if response.status != 200:
            detail = response.read(300).decode('utf-8', 'replace').strip()
            return {'ok': False, 'error': 'HTTP %d %s' % (response.status, detail)}
        result = measure_stream(iter(response.readline, b''), started)
        result['ok'] = result['output_tokens'] > 0
        if not result['ok']:
            result['error'] = 'response carried no tokens'
        return result
    except (OSError, http_client.HTTPException, ServingBenchmarkError) as exc:
        return {'ok': False, 'error': '%s: %s' % (type(exc).__name__, exc)}
    finally:
        conn.close()


def run_chat_benchmark(base_url, model, num_prompts, concurrency, input_words, max_tokens,
                       api_key=None, request_timeout_s=120.0, time_limit_s=None):
    """Send ``num_prompts`` streaming chat requests, ``concurrency`` at a time.

    ``time_limit_s`` bounds the run on a slow server: no request starts after
    it, in-flight ones finish. Returns (per-request results, wall-clock duration).
    """
    if num_prompts < 1 or concurrency < 1 or max_tokens < 1:
        raise ServingBenchmarkError('num_prompts, concurrency and max_tokens must be at least 1')
    scheme, host, port, prefix = _split_base_url(base_url)
    path = prefix + '/v1/chat/completions'
    headers = {'Content-Type': 'application/json', 'Accept': 'text/event-stream'}
    if api_key:
        headers['Authorization'] = 'Bearer %s' % api_key

    lock = threading.Lock()
    state = {'next': 0}
    results = []
    started = time.monotonic()

    def worker():
        while True:
            with lock:
                index = state['next']
                if index >= num_prompts:
                    return
                if time_limit_s is not None and time.monotonic() - started >= time_limit_s:
                    return
                state['next'] += 1
            body = chat_request_body(model, build_prompt(index, input_words), max_tokens)
            result = _one_request(scheme, host, port, path, headers, body, request_timeout_s)
            with lock:
                results.append(result)

    threads = [threading.Thread(target=worker, name='bench-%d' % n) for n in range(min(concurrency, num_prompts))]
    for thread in threads:
        thread.daemon = True
        thread.start()
    for thread in threads:
        thread.join()
    return results, time.monotonic() - started


# Where a release keeps its serving benchmark, newest layout first. SGLang 0.5.23 moved it to
# sglang/benchmark/serving.py and left sglang/bench_serving.py as a shim that warns it will be
# removed; 0.5.9 has only the latter. Options and --output-file rows are the same in both.
BENCH_SERVING_MODULES = (('sglang/benchmark/serving.py', 'sglang.benchmark.serving'),
                         ('sglang/bench_serving.py', 'sglang.bench_serving'))


def bench_serving_module(site_packages):
    """The module to run as ``python -m`` for the serving benchmark of the SGLang installed in
    ``site_packages`` (the interpreter's site-packages folders), found by its file."""
    for relative, module in BENCH_SERVING_MODULES:
        if any(os.path.isfile(os.path.join(folder, relative)) for folder in site_packages):
            return module
    raise ServingBenchmarkError('no SGLang serving benchmark (%s) in %s'
                                % (' or '.join(relative for relative, _module in BENCH_SERVING_MODULES),
                                   ', '.join(site_packages) or 'no site-packages'))


def bench_serving_argv(python, bench_module, host, port, model, served_model_name, num_prompts, concurrency,
                       input_len, output_len, output_file):
    """Command line of SGLang's own benchmark; random-ids needs no dataset download."""
    return [python, '-m', bench_module,
            '--backend', 'sglang-oai-chat',
            '--host', host, '--port', str(port),
            '--model', model, '--served-model-name', served_model_name,
            '--dataset-name', 'random-ids',
            '--random-input-len', str(input_len), '--random-output-len', str(output_len),
            '--random-range-ratio', '1.0',
            '--num-prompts', str(num_prompts), '--max-concurrency', str(concurrency),
            '--output-file', output_file]


def tokens_per_joule(output_throughput, gpu):
    """Output tokens per joule of GPU energy: tok/s divided by the summed mean power of all GPUs.

    None without power readings (no nvidia-smi, or a VM that hides the sensor).
    """
    powers = [g.get('mean_power_w') for g in (gpu or {}).get('gpus') or []]
    powers = [p for p in powers if p]
    if not output_throughput or not powers:
        return None
    return round(output_throughput / sum(powers), 4)


# What repeated runs are compared on; the gate's objective is one of these.
OBJECTIVES = ('output_throughput', 'tokens_per_joule')


def summarize_repeats(runs):
    """Fold repeated runs into one result: means at the top level, every run in ``runs``.

    Each run is a summarize_requests/parse_bench_serving_jsonl result with its own ``gpu``
    summary. The top level keeps the keys of a single run (their mean, so readers of one-run
    results keep working) and adds ``repeats``, ``spread`` per objective and ``runs``.
    """
    if not runs:
        raise ServingBenchmarkError('no benchmark run to summarize')
    for run in runs:
        run['tokens_per_joule'] = tokens_per_joule(run.get('output_throughput'), run.get('gpu'))
    merged = dict(runs[-1])
    for key in ('output_throughput', 'total_throughput', 'median_ttft_ms', 'p99_ttft_ms', 'median_tpot_ms',
                'p99_tpot_ms', 'duration_s'):
        values = [r.get(key) for r in runs if r.get(key) is not None]
        merged[key] = rounded(sum(values) / len(values)) if values else None
    for key in ('completed', 'failed', 'total_input_tokens', 'total_output_tokens'):
        merged[key] = sum(r.get(key) or 0 for r in runs)
    merged['errors'] = sorted(set(e for r in runs for e in (r.get('errors') or [])))[:5]
    merged['gpu'] = _merge_gpu([r.get('gpu') or {} for r in runs])
    merged['spread'] = dict((key, spread([r.get(key) for r in runs])) for key in OBJECTIVES)
    merged['tokens_per_joule'] = merged['spread']['tokens_per_joule']['mean']
    merged['repeats'] = len(runs)
    run_keys = ('output_throughput', 'tokens_per_joule', 'completed', 'duration_s', 'median_ttft_ms', 'median_tpot_ms')
    merged['runs'] = [dict((k, r.get(k)) for k in run_keys) for r in runs]
    for run, gpu in zip(merged['runs'], [r.get('gpu') or {} for r in runs]):
        run['mean_power_w'] = gpu.get('mean_power_w')
    return merged


def _merge_gpu(summaries):
    """Mean of the per-run GPU summaries (each run weighs the same, like the throughput mean)."""
    with_samples = [s for s in summaries if s.get('samples')]
    if not with_samples:
        result = dict(summaries[-1]) if summaries else summarize_gpu_samples([])
        return result
    result = dict(with_samples[-1])
    result['samples'] = sum(s['samples'] for s in with_samples)
    for key in ('mean_power_w', 'power_limit_w', 'mean_util_pct', 'power_fraction'):
        values = [s.get(key) for s in with_samples if s.get(key) is not None]
        result[key] = rounded(sum(values) / len(values), 3 if key == 'power_fraction' else 1) if values else None
    maxima = [s.get('max_power_w') for s in with_samples if s.get('max_power_w') is not None]
    result['max_power_w'] = max(maxima) if maxima else None
    gpus = []
    for index in range(max(len(s.get('gpus') or []) for s in with_samples)):
        rows = [s['gpus'][index] for s in with_samples if index < len(s.get('gpus') or [])]
        row = {'index': index}
        for key in ('mean_power_w', 'mean_util_pct', 'power_limit_w'):
            values = [r.get(key) for r in rows if r.get(key) is not None]
            row[key] = rounded(sum(values) / len(values), 1) if values else None
        maxima = [r.get('max_power_w') for r in rows if r.get('max_power_w') is not None]
        row['max_power_w'] = max(maxima) if maxima else None
        gpus.append(row)
    result['gpus'] = gpus
    errors = [e for s in summaries for e in (s.get('sample_errors') or [])]
    result['sample_errors'] = errors[:3]
    return result
