# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._gpu_textfile import (
    QUERY_FIELDS,
    GpuTextfileError,
    count_xids,
    last_baseline,
    parse_gpu_query,
    render,
)
from ansible_collections.inferops.serving.plugins.module_utils._history import make_record, serialize

HERE = os.path.dirname(os.path.abspath(__file__))
TOPOLOGY = os.path.join(HERE, 'fixtures', 'topology')
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
LAB_NVIDIA_SMI = os.path.join(REPO, 'molecule', 'resources', 'lab', 'sim', 'nvidia-smi')
MIB = 1024 * 1024

# One sample line of the text exposition format: name, optional labels, a float value.
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? '
                    r'(-?[0-9.e+-]+|NaN|[+-]Inf)$')


def fixture(*parts):
    with open(os.path.join(TOPOLOGY, *parts)) as handle:
        return handle.read()


def samples(text):
    """{(name, labels-string): value} of an exposition text, checking every line's syntax."""
    found = {}
    typed = set()
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            typed.add(line.split()[2])
            continue
        if line.startswith('# HELP '):
            continue
        assert SAMPLE.match(line), 'not a valid sample line: %r' % line
        name, _sep, rest = line.partition('{') if '{' in line.split(' ')[0] else (line.split(' ')[0], '', '')
        labels = rest.rsplit('}', 1)[0] if rest else ''
        assert name in typed, '%s has no TYPE line before it' % name
        found[(name, labels)] = float(line.rsplit(' ', 1)[1])
    return found


@pytest.mark.parametrize('capture', [
    ('h200-2026-11-29', 'query_all.txt'),
    ('h200-2026-11-29', 'query_all_nounits.txt'),
])
def test_a_real_h200_reading_becomes_power_memory_and_temperature(capture):
    gpus = parse_gpu_query(fixture(*capture))
    assert len(gpus) == 1
    gpu = gpus[0]
    assert gpu['index'] == 0 and gpu['bus_id'] == '0000:00:06.0' and gpu['name'] == 'NVIDIA H200'
    assert gpu['power_limit_w'] == 700.0 and 78 < gpu['power_draw_w'] < 81
    assert gpu['utilization_ratio'] == 0.0
    assert gpu['memory_total_bytes'] == 143771 * MIB and gpu['memory_used_bytes'] == 0
    assert gpu['temperature_c'] == 37.0


def test_two_real_gpus_keep_their_index_and_bus():
    gpus = parse_gpu_query(fixture('h200x2-2026-11-29', 'query_all.txt'))
    assert [(g['index'], g['bus_id']) for g in gpus] == [(0, '0000:00:06.0'), (1, '0000:00:07.0')]


def test_sensors_a_vm_does_not_expose_are_left_out():
    text = ('index, pci.bus_id, name, power.draw [W], power.limit [W], utilization.gpu [%], '
            'memory.used [MiB], memory.total [MiB], temperature.gpu\n'
            '0, 00000000:01:00.0, NVIDIA RTX PRO 6000, [N/A], 600.00, [Not Supported], 0, 97887, [N/A]\n')
    gpu = parse_gpu_query(text)[0]
    assert gpu['power_draw_w'] is None and gpu['utilization_ratio'] is None and gpu['temperature_c'] is None
    found = samples(render(gpus=[gpu]))
    assert not any(name == 'inferops_gpu_power_draw_watts' for name, _labels in found)
    assert found[('inferops_gpu_power_limit_watts', 'gpu="0",bus_id="0000:01:00.0",name="NVIDIA RTX PRO 6000"')] == 600.0


@pytest.mark.parametrize('text, message', [
    ('', 'no column index'),
    (fixture('h200-2026-11-29', 'query_all_noheader_nounits.txt'), 'expected a header'),
    ('index, pci.bus_id, name, power.draw, power.limit, utilization.gpu, memory.used, memory.total, temperature.gpu\n'
     '0, 00000000:01:00.0, X, 1, 2\n', 'has 5 values for 9 columns'),
])
def test_output_that_is_not_the_query_is_refused_with_the_reason(text, message):
    with pytest.raises(GpuTextfileError, match=message):
        parse_gpu_query(text)


@pytest.mark.skipif(not os.path.exists('/usr/bin/python3'), reason='the lab nvidia-smi runs on python3')
def test_the_lab_nvidia_smi_answers_the_collector_query_under_load(tmp_path):
    load = tmp_path / 'gpu-load.json'
    load.write_text(json.dumps({'power_w': 250, 'util_pct': 35, 'memory_used_mib': 90000, 'temperature_c': 61}))
    out = subprocess.run([sys.executable, LAB_NVIDIA_SMI, '--query-gpu=' + ','.join(QUERY_FIELDS), '--format=csv,nounits'],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, INFEROPS_LAB_GPU_LOAD=str(load))).stdout
    gpus = parse_gpu_query(out)
    assert len(gpus) == 8
    assert all(g['power_draw_w'] == 250.0 and g['power_limit_w'] == 600.0 for g in gpus)
    assert all(g['utilization_ratio'] == 0.35 and g['temperature_c'] == 61.0 for g in gpus)
    assert gpus[7]['bus_id'] == '0000:08:00.0' and gpus[0]['memory_used_bytes'] == 90000 * MIB


KERNEL_LOG = """\
[    4.120331] nvidia: loading out-of-tree module taints kernel.
[ 1843.101203] NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.
[ 1902.551209] NVRM: Xid (PCI:0000:03:00): 13, pid=2342, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address
[ 1902.551300] NVRM: Xid (PCI:0000:03:00): 13, pid=2342, name=python3, Graphics Exception: ESR 0x504648=0x102000e 0x504650=0x0
[ 2001.000001] NVRM: Xid (0000:05:00): 31, Ch 00000010, engmask 00000101, intr 10000000
[ 2100.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
"""


def test_xid_lines_are_counted_per_gpu_and_code():
    assert count_xids(KERNEL_LOG) == {
        ('0000:44:00.0', 79): 1,
        ('0000:03:00.0', 13): 2,
        ('0000:05:00.0', 31): 1,
        # Newer drivers say it without an Xid line.
        ('0000:b3:00.0', 79): 1,
    }
    assert count_xids('') == {}


def test_xids_carry_the_gpu_index_when_nvidia_smi_still_lists_the_gpu():
    gpus = [{'index': 2, 'bus_id': '0000:03:00.0', 'name': 'G', 'power_draw_w': None, 'power_limit_w': None,
             'utilization_ratio': None, 'memory_used_bytes': None, 'memory_total_bytes': None, 'temperature_c': None}]
    found = samples(render(gpus=gpus, xids=count_xids(KERNEL_LOG)))
    assert found[('inferops_gpu_xid_errors_total', 'gpu="2",bus_id="0000:03:00.0",xid="13"')] == 2
    assert found[('inferops_gpu_xid_errors_total', 'gpu="",bus_id="0000:44:00.0",xid="79"')] == 1


def _history(*records):
    return ''.join(serialize(make_record(event, 'gpu-node', fields, epoch)) for event, epoch, fields in records)


def test_the_baseline_is_the_newest_benchmark_without_an_experiment():
    text = _history(
        ('deploy', 100, {'fingerprint': 'a'}),
        ('benchmark', 200, {'fingerprint': 'a', 'experiment': None,
                            'metrics': {'output_throughput': 1867.4, 'concurrency': 64}}),
        ('benchmark', 300, {'fingerprint': 'b', 'experiment': 'sm120_allreduce_fusion',
                            'metrics': {'output_throughput': 236.0, 'concurrency': 64}}),
        ('rollback', 310, {'fingerprint': 'a'}),
    ) + '{"event": "benchmark", "metrics": {"output_throu'  # a torn last line
    assert last_baseline(text) == {'output_throughput': 1867.4, 'concurrency': 64, 'epoch': 200}
    found = samples(render(baseline=last_baseline(text)))
    assert found[('inferops_sglang_baseline_output_throughput_tokens_per_second', '')] == 1867.4
    assert found[('inferops_sglang_baseline_concurrency', '')] == 64


@pytest.mark.parametrize('text', [
    '',
    _history(('deploy', 1, {'fingerprint': 'a'})),
    _history(('benchmark', 1, {'experiment': None, 'metrics': {}})),
    _history(('benchmark', 1, {'experiment': None, 'metrics': {'output_throughput': 0}})),
])
def test_no_baseline_means_no_baseline_series(text):
    assert last_baseline(text) is None
    assert 'baseline' not in render(baseline=last_baseline(text))


def test_a_failed_nvidia_smi_is_reported_not_hidden():
    found = samples(render(gpus=None, gpu_error='nvidia-smi exited 9', health_up=False, now=1.5))
    assert found[('inferops_gpu_query_success', '')] == 0
    assert found[('inferops_sglang_health_up', '')] == 0
    assert found[('inferops_textfile_last_run_timestamp_seconds', '')] == 1.5
    assert not any(name.startswith('inferops_gpu_power') for name, _labels in found)


def test_a_node_without_gpus_reports_no_gpu_series():
    assert render() == '\n'
    assert 'inferops_gpu_query_success' not in render(health_up=True)


def test_label_values_are_escaped():
    gpu = {'index': 0, 'bus_id': '0000:01:00.0', 'name': 'A "quoted" \\ name', 'power_draw_w': 1.0,
           'power_limit_w': None, 'utilization_ratio': None, 'memory_used_bytes': None,
           'memory_total_bytes': None, 'temperature_c': None}
    text = render(gpus=[gpu])
    samples(text)
    assert 'name="A \\"quoted\\" \\\\ name"' in text
