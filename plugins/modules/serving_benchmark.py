#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: serving_benchmark
short_description: Measure the throughput, TTFT and TPOT of a running SGLang server
version_added: 0.1.0
description:
  - Sends a bounded number of streaming chat requests at a fixed concurrency to an
    OpenAI-compatible SGLang server and reports output tokens per second, median and
    p99 time to first token (TTFT) and time per output token (TPOT).
  - Samples GPU power draw and utilisation through C(nvidia-smi) every O(sample_interval)
    seconds while the benchmark runs, so that a throughput change can be read next to
    what the GPUs were doing (for example 250 W of 600 W on a PCIe-bound node).
  - O(mode=builtin) needs only the Python standard library on the node.
    O(mode=sglang) runs SGLang's own serving benchmark with the C(random-ids)
    dataset (no download) in the server's virtual environment, C(sglang.benchmark.serving)
    where the installed SGLang has it (0.5.23 on), else C(sglang.bench_serving) (0.5.9),
    told apart by the files in the interpreter's site-packages.
  - The module only reads; in check mode it does not send load and returns C(skipped).
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  mode:
    description: Which client generates the load.
    type: str
    choices: [builtin, sglang]
    default: builtin
  base_url:
    description:
      - Where the server listens. The benchmark is meant for the node's own server, normally on loopback.
    type: str
    default: http://127.0.0.1:8000
  model:
    description: Served model name, sent as the C(model) of each chat request.
    type: str
    required: true
  model_path:
    description:
      - Model path or Hugging Face id whose tokenizer SGLang's benchmark loads (its C(--model)).
      - Used with O(mode=sglang) only; defaults to O(model).
    type: str
  api_key:
    description:
      - API key of the server, sent as a bearer token (O(mode=sglang) passes it as C(OPENAI_API_KEY)).
    type: str
  num_prompts:
    description: Number of requests in one run.
    type: int
    default: 64
  concurrency:
    description: Requests in flight at any time.
    type: int
    default: 16
  input_len:
    description: Prompt length (words for the built-in client, tokens for SGLang's benchmark).
    type: int
    default: 128
  output_len:
    description: Output tokens per request (C(max_tokens), with EOS ignored so runs stay comparable).
    type: int
    default: 128
  request_timeout:
    description: Seconds one request may take.
    type: float
    default: 120
  time_limit:
    description:
      - Seconds after which the built-in client starts no new request; in-flight requests finish.
      - Bounds the run when the server has become slow. Unset means no limit beyond O(num_prompts).
    type: float
  python:
    description: Interpreter of the virtual environment that holds SGLang, for O(mode=sglang).
    type: path
    default: /opt/sglang/venv/bin/python
  sample_gpus:
    description: Sample GPU power and utilisation with C(nvidia-smi) during the run.
    type: bool
    default: true
  sample_interval:
    description: Seconds between two C(nvidia-smi) readings.
    type: float
    default: 1.0
  repeats:
    description:
      - Runs of the same load, one after another. With two or more the result carries the spread
        (mean, standard deviation, min, max, 95% confidence half-width) that a gate needs to tell a
        real change from run-to-run noise; top-level figures are the means over the runs.
    type: int
    default: 1
seealso:
  - module: inferops.serving.history
notes:
  - Requests that fail are counted in RV(benchmark.failed); throughput counts successful requests only.
'''

EXAMPLES = r'''
- name: Benchmark the local server with the built-in client
  inferops.serving.serving_benchmark:
    model: glm-5
    api_key: "{{ sglang_server_api_key }}"
    num_prompts: 512
    concurrency: 64
    output_len: 1024
  register: __bench

- name: Benchmark with SGLang's own serving benchmark
  inferops.serving.serving_benchmark:
    mode: sglang
    model: glm-5
    model_path: lukealonso/GLM-5-NVFP4
    input_len: 1024
    output_len: 1024
    num_prompts: 512
    concurrency: 64

- name: Three runs, to know the noise
  inferops.serving.serving_benchmark:
    model: glm-5
    repeats: 3
  register: __bench
'''

RETURN = r'''
benchmark:
  description: The measurement.
  returned: success, not in check mode
  type: dict
  contains:
    repeats:
      description: Runs the figures are averaged over.
      type: int
      sample: 3
    spread:
      description:
        - Per objective (C(output_throughput), C(tokens_per_joule)), over the runs - C(n), C(mean), C(stdev),
          C(min), C(max), C(ci95) (95% confidence half-width of the mean) and C(cv_pct). C(stdev) and C(ci95)
          are null for a single run.
      type: dict
      sample: {output_throughput: {n: 3, mean: 1861.2, stdev: 24.1, min: 1838.0, max: 1886.0, ci95: 59.9, cv_pct: 1.29}}
    runs:
      description: Each run's C(output_throughput), C(tokens_per_joule), C(mean_power_w), C(completed), C(duration_s) and medians.
      type: list
      elements: dict
    tokens_per_joule:
      description:
        - Output tokens per joule of GPU energy - output tokens per second divided by the summed mean power of all
          GPUs, mean over the runs. Null without power readings.
      type: float
      sample: 0.93
    mode:
      description: Client that generated the load.
      type: str
      sample: builtin
    num_prompts:
      description: Requests asked for.
      type: int
      sample: 64
    concurrency:
      description: Requests in flight at a time.
      type: int
      sample: 16
    input_len:
      description: Prompt length asked for.
      type: int
      sample: 128
    output_len:
      description: Output tokens asked for per request.
      type: int
      sample: 128
    completed:
      description: Requests that returned tokens.
      type: int
      sample: 64
    failed:
      description: Requests that failed (built-in client only).
      type: int
      sample: 0
    errors:
      description: Up to five distinct error messages of failed requests (built-in client only).
      type: list
      elements: str
      sample: []
    duration_s:
      description: Wall-clock seconds of the run.
      type: float
      sample: 4.39
    total_input_tokens:
      description: Prompt tokens the server counted.
      type: int
      sample: 8192
    total_output_tokens:
      description: Output tokens the server produced.
      type: int
      sample: 8192
    output_throughput:
      description: Output tokens per second over the run.
      type: float
      sample: 1867.2
    total_throughput:
      description: Input plus output tokens per second.
      type: float
      sample: 3734.4
    median_ttft_ms:
      description: Median time to first token in milliseconds.
      type: float
      sample: 41.3
    p99_ttft_ms:
      description: 99th percentile time to first token in milliseconds.
      type: float
      sample: 80.2
    median_tpot_ms:
      description: Median time per output token after the first, in milliseconds.
      type: float
      sample: 8.1
    p99_tpot_ms:
      description: 99th percentile time per output token in milliseconds.
      type: float
      sample: 9.7
    gpu:
      description: GPU power and utilisation sampled during the run (empty readings when O(sample_gpus=false)).
      type: dict
      contains:
        samples:
          description: Number of nvidia-smi readings.
          type: int
          sample: 5
        gpus:
          description: Per GPU index, C(mean_power_w), C(max_power_w), C(mean_util_pct) and C(power_limit_w).
          type: list
          elements: dict
        mean_power_w:
          description: Mean power draw per GPU over the run, averaged over GPUs.
          type: float
          sample: 250.0
        max_power_w:
          description: Highest single reading of any GPU.
          type: float
          sample: 262.0
        power_limit_w:
          description: Mean power limit of the GPUs.
          type: float
          sample: 600.0
        power_fraction:
          description: C(mean_power_w) divided by C(power_limit_w).
          type: float
          sample: 0.417
        mean_util_pct:
          description: Mean GPU utilisation in percent.
          type: float
          sample: 35.0
        sample_errors:
          description: Up to three messages of readings that failed.
          type: list
          elements: str
          sample: []
'''

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._commands import (
    find_nvidia_smi,
    run_c,
)
from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (
    DistRecordError,
    interpreter_site_packages,
)
from ansible_collections.inferops.serving.plugins.module_utils._serving_benchmark import (
    NVIDIA_SMI_QUERY,
    GpuSampler,
    ServingBenchmarkError,
    bench_serving_argv,
    bench_serving_module,
    parse_bench_serving_jsonl,
    run_chat_benchmark,
    summarize_gpu_samples,
    summarize_repeats,
    summarize_requests,
)


def _gpu_reader(module):
    nvidia_smi = find_nvidia_smi(module)
    if nvidia_smi is None:
        return None

    def read():
        rc, out, err = run_c(module, [nvidia_smi] + NVIDIA_SMI_QUERY)
        if rc != 0:
            raise ServingBenchmarkError('nvidia-smi exited %d: %s' % (rc, err.strip()))
        return out
    return read


def _run_builtin(module, params):
    results, duration = run_chat_benchmark(
        base_url=params['base_url'], model=params['model'], num_prompts=params['num_prompts'],
        concurrency=params['concurrency'], input_words=params['input_len'], max_tokens=params['output_len'],
        api_key=params['api_key'], request_timeout_s=params['request_timeout'],
        time_limit_s=params['time_limit'])
    return summarize_requests(results, duration)


def _bench_serving_module(module, python):
    try:
        return bench_serving_module(interpreter_site_packages(lambda argv: run_c(module, argv), python))
    except (DistRecordError, ServingBenchmarkError) as exc:
        module.fail_json(msg='mode=sglang: %s' % exc)


def _run_bench_serving(module, params):
    python = params['python']
    if not os.access(python, os.X_OK):
        module.fail_json(msg='mode=sglang needs the SGLang virtual environment; %s is not an executable '
                             'interpreter (set python, or use mode=builtin)' % python)
    base = params['base_url'].rstrip('/')
    host_port = base.split('://', 1)[-1]
    host, _sep, port = host_port.partition(':')
    workdir = tempfile.mkdtemp(prefix='sglang-bench-')
    try:
        output_file = os.path.join(workdir, 'bench.jsonl')
        argv = bench_serving_argv(python, _bench_serving_module(module, python), host, port or '80',
                                  params['model_path'] or params['model'],
                                  params['model'], params['num_prompts'], params['concurrency'],
                                  params['input_len'], params['output_len'], output_file)
        env = {'OPENAI_API_KEY': params['api_key']} if params['api_key'] else {}
        rc, out, err = run_c(module, argv, environ_update=env, cwd=workdir)
        if rc != 0 or not os.path.exists(output_file):
            module.fail_json(msg='%s failed (rc=%d)' % (argv[2], rc), rc=rc,
                             stdout=out[-4000:], stderr=err[-4000:])
        with open(output_file) as handle:
            return parse_bench_serving_jsonl(handle.read())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _one_run(module, params, run, reader):
    # Power is sampled per run, so that each run has its own tokens per joule.
    if reader is None:
        metrics = run(module, params)
        metrics['gpu'] = summarize_gpu_samples([])
        metrics['gpu']['sample_errors'] = [] if not params['sample_gpus'] else ['nvidia-smi not found']
        return metrics
    with GpuSampler(reader, params['sample_interval']) as sampler:
        metrics = run(module, params)
    metrics['gpu'] = sampler.summary()
    return metrics


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type='str', choices=['builtin', 'sglang'], default='builtin'),
            base_url=dict(type='str', default='http://127.0.0.1:8000'),
            model=dict(type='str', required=True),
            model_path=dict(type='str'),
            api_key=dict(type='str', no_log=True),
            num_prompts=dict(type='int', default=64),
            concurrency=dict(type='int', default=16),
            input_len=dict(type='int', default=128),
            output_len=dict(type='int', default=128),
            request_timeout=dict(type='float', default=120),
            time_limit=dict(type='float'),
            python=dict(type='path', default='/opt/sglang/venv/bin/python'),
            sample_gpus=dict(type='bool', default=True),
            sample_interval=dict(type='float', default=1.0),
            repeats=dict(type='int', default=1),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for key in ('num_prompts', 'concurrency', 'input_len', 'output_len', 'repeats'):
        if params[key] < 1:
            module.fail_json(msg='%s must be at least 1, got %d' % (key, params[key]))
    if params['sample_interval'] <= 0:
        module.fail_json(msg='sample_interval must be positive, got %s' % params['sample_interval'])
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg='check mode: no load sent to the server')

    run = _run_bench_serving if params['mode'] == 'sglang' else _run_builtin
    reader = _gpu_reader(module) if params['sample_gpus'] else None
    runs = []
    try:
        for _repeat in range(params['repeats']):
            runs.append(_one_run(module, params, run, reader))
        metrics = summarize_repeats(runs)
    except ServingBenchmarkError as exc:
        module.fail_json(msg=str(exc))
    metrics.update(mode=params['mode'], num_prompts=params['num_prompts'], concurrency=params['concurrency'],
                   input_len=params['input_len'], output_len=params['output_len'])
    if not metrics.get('completed'):
        module.fail_json(msg='no benchmark request succeeded against %s: %s'
                             % (params['base_url'], '; '.join(metrics.get('errors') or ['no detail'])),
                         benchmark=metrics)
    module.exit_json(changed=False, benchmark=metrics)


if __name__ == '__main__':
    main()
