# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._history import (
    HistoryError,
    is_repeat,
    latest,
    make_record,
    parse_history,
    recent_benchmark,
    serialize,
    torn_tail,
)

NOW = 1771509223.0


def record(event, epoch, **fields):
    return make_record(event, 'gpu-node', fields, epoch)


def test_record_is_one_sorted_json_line_with_utc_time():
    line = serialize(record('deploy', NOW, fingerprint='abc'))
    assert line.endswith('\n') and line.count('\n') == 1
    data = json.loads(line)
    assert data['ts'] == '2026-02-19T13:53:43Z'
    assert data['event'] == 'deploy' and data['node'] == 'gpu-node' and data['fingerprint'] == 'abc'


@pytest.mark.parametrize('event, fields, message', [
    ('upgrade', {}, 'event must be one of'),
    ('deploy', {'ts': 'yesterday'}, 'may not set ts'),
    ('benchmark', {'metrics': {'output_throughput': float('nan')}}, 'JSON'),
    ('benchmark', {'metrics': object()}, 'JSON'),
])
def test_bad_records_are_refused(event, fields, message):
    with pytest.raises(HistoryError, match=message):
        make_record(event, 'gpu-node', fields, NOW)


def test_parse_skips_a_torn_last_line_and_foreign_lines():
    text = ''.join(serialize(record('deploy', NOW + i, fingerprint=str(i))) for i in range(2))
    text += '["not", "a", "record"]\n{"event": "party"}\n{"event": "deploy", "finger'
    records, skipped = parse_history(text)
    assert [r['fingerprint'] for r in records] == ['0', '1']
    assert skipped == [3, 4, 5]


def test_a_redeploy_of_the_same_configuration_is_a_repeat():
    history = [record('deploy', NOW, fingerprint='a'), record('benchmark', NOW + 1, fingerprint='a')]
    assert is_repeat(history, record('deploy', NOW + 2, fingerprint='a'))
    assert not is_repeat(history, record('deploy', NOW + 2, fingerprint='b'))
    # Back to a configuration seen before, after another one: a real deploy again.
    history.append(record('deploy', NOW + 3, fingerprint='b'))
    assert not is_repeat(history, record('deploy', NOW + 4, fingerprint='a'))
    assert not is_repeat([], record('deploy', NOW, fingerprint='a'))
    assert not is_repeat(history, record('deploy', NOW, note='no fingerprint'))


def test_latest_matches_fields():
    history = [record('experiment', NOW, experiment='x', outcome='kept'),
               record('experiment', NOW + 1, experiment='y', outcome='rolled_back')]
    assert latest(history, 'experiment')['experiment'] == 'y'
    assert latest(history, 'experiment', experiment='x')['outcome'] == 'kept'
    assert latest(history, 'rollback') is None


def bench(epoch, fingerprint, throughput=1867.0, experiment=None):
    return record('benchmark', epoch, fingerprint=fingerprint, experiment=experiment,
                  metrics={'output_throughput': throughput})


def test_recent_benchmark_is_the_newest_benchmark_of_this_configuration():
    history = [bench(NOW - 50, 'base', 1800.0), bench(NOW - 40, 'base', 1867.0),
               bench(NOW - 30, 'fused', 236.0, experiment='sm120_allreduce_fusion'),
               bench(NOW - 20, 'other', 900.0)]
    assert recent_benchmark(history, 'base', 3600, NOW)['metrics']['output_throughput'] == 1867.0


@pytest.mark.parametrize('history, max_age', [
    ([], 3600),
    ([bench(NOW - 7200, 'base')], 3600),
    ([bench(NOW - 10, 'other')], 3600),
    ([bench(NOW - 10, 'base', throughput=0)], 3600),
])
def test_no_recent_benchmark(history, max_age):
    assert recent_benchmark(history, 'base', max_age, NOW) is None


WORKLOAD = {'mode': 'chat', 'num_prompts': 64, 'concurrency': 32, 'input_len': 128, 'output_len': 64}


def test_a_baseline_counts_only_under_the_workload_it_ran():
    measured = bench(NOW - 10, 'base', 1867.0)
    measured['workload'] = dict(WORKLOAD)
    history = [measured]
    assert recent_benchmark(history, 'base', 3600, NOW, WORKLOAD)['metrics']['output_throughput'] == 1867.0
    # The same values as the inventory's text renders them.
    assert recent_benchmark(history, 'base', 3600, NOW, {k: str(v) for k, v in WORKLOAD.items()}) is not None
    assert recent_benchmark(history, 'base', 3600, NOW, dict(WORKLOAD, concurrency=64)) is None
    assert recent_benchmark(history, 'base', 3600, NOW, dict(WORKLOAD, num_prompts=16)) is None
    assert recent_benchmark(history, 'base', 3600, NOW, dict(WORKLOAD, extra=1)) is None


def test_a_baseline_that_does_not_say_its_workload_is_measured_again():
    history = [bench(NOW - 10, 'base', 1867.0)]
    assert recent_benchmark(history, 'base', 3600, NOW, WORKLOAD) is None
    assert recent_benchmark(history, 'base', 3600, NOW) is not None


def test_the_newest_benchmark_of_the_workload_wins_over_a_newer_one_of_another():
    ours, theirs = bench(NOW - 20, 'base', 1800.0), bench(NOW - 10, 'base', 2400.0)
    ours['workload'], theirs['workload'] = dict(WORKLOAD), dict(WORKLOAD, concurrency=128)
    assert recent_benchmark([ours, theirs], 'base', 3600, NOW, WORKLOAD)['metrics']['output_throughput'] == 1800.0


def test_negative_max_age_is_refused():
    with pytest.raises(HistoryError, match='max_age'):
        recent_benchmark([], 'base', -1, NOW)


@pytest.mark.parametrize('data, expected', [
    (b'', None),
    (b'{"event": "deploy"}\n', None),
    (b'{"event": "deploy"}\n{"event": "dep', (2, False)),
    (b'{"event": "deploy"}\n{"event": "deploy"}', (2, True)),
    (b'{"event": "dep', (1, False)),
    (b'{"event": "deploy"}\n\xff\xfe', (2, False)),
])
def test_torn_tail(data, expected):
    assert torn_tail(data) == expected


def test_a_line_separator_inside_a_record_does_not_split_it():
    records, skipped = parse_history('{"event": "deploy", "note": "a\u2028b"}\n')
    assert len(records) == 1 and skipped == []
