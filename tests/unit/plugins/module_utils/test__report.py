# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._report import (
    LABEL_GAP,
    REDACTED,
    ReportError,
    layout_labels,
    link_class,
    redact,
    throughput_chart_svg,
    topology_grid,
    topology_text,
)
from ansible_collections.inferops.serving.plugins.module_utils._report_view import report_view

SVG = '{http://www.w3.org/2000/svg}'
T0 = 1771509223.0

SEED_HISTORY = [
    {'event': 'deploy', 'epoch': T0, 'fingerprint': 'base'},
    {'event': 'benchmark', 'epoch': T0 + 60, 'experiment': None,
     'metrics': {'output_throughput': 1867.0, 'gpu': {'mean_power_w': 250.0, 'power_limit_w': 600.0}}},
    {'event': 'benchmark', 'epoch': T0 + 400, 'experiment': 'sm120_allreduce_fusion',
     'metrics': {'output_throughput': 236.0, 'gpu': {'mean_power_w': 125.0, 'power_limit_w': 600.0}}},
    {'event': 'rollback', 'epoch': T0 + 460, 'experiment': 'sm120_allreduce_fusion'},
    {'event': 'experiment', 'epoch': T0 + 470, 'experiment': 'sm120_allreduce_fusion', 'outcome': 'rolled_back'},
]

PROXMOX_8GPU = {
    'gpu_count': 3,
    'gpus': [{'name': 'NVIDIA RTX PRO 6000 Blackwell Server Edition'}] * 3,
    'gpu_links': [['X', 'PHB', 'SYS'], ['PHB', 'X', 'NV4'], ['SYS', 'NV4', 'X']],
    'p2p_read': [['X', 'NS', 'NS'], ['NS', 'X', 'OK'], ['NS', 'OK', 'X']],
    'allreduce_fusion_advised': False,
    'reasons': ['GPU pairs without P2P: allreduce fusion needs peer-to-peer access'],
    'recommended_env': {'NCCL_P2P_LEVEL': '5', 'NCCL_IB_DISABLE': '1'},
    'recommended_sglang_args': {'disable-custom-all-reduce': True, 'tp-size': 8},
    'weakest_link': 'SYS',
}


def parse(svg):
    return ET.fromstring(svg)


def test_chart_marks_each_benchmark_and_the_rollback():
    root = parse(throughput_chart_svg(SEED_HISTORY))
    texts = [t.text for t in root.iter(SVG + 'text')]
    assert '1,867' in texts and '236' in texts
    assert 'rollback to baseline' in texts
    assert 'sm120_allreduce_fusion: rolled back' in texts
    tips = [t.text for t in root.iter(SVG + 'title')]
    assert 'baseline: 1,867.0 tok/s' in tips
    assert 'sm120_allreduce_fusion: 236.0 tok/s' in tips
    assert '125 W mean GPU power' in tips


def test_chart_puts_the_regression_below_the_baseline():
    root = parse(throughput_chart_svg(SEED_HISTORY))
    circles = list(root.iter(SVG + 'circle'))
    diamonds = [p for p in root.iter(SVG + 'path') if p.find(SVG + 'title') is not None
                and 'tok/s' in p.find(SVG + 'title').text]
    baseline_y = float(circles[0].get('cy'))
    experiment_top_y = float(diamonds[0].get('d').split()[1])
    # SVG y grows downwards: the slower experiment is drawn lower.
    assert experiment_top_y > baseline_y


def test_chart_escapes_experiment_names():
    history = [dict(SEED_HISTORY[2], experiment='<script>x</script>')]
    svg = throughput_chart_svg(history)
    assert '<script>' not in svg
    parse(svg)


def test_chart_without_benchmarks_says_what_to_do():
    root = parse(throughput_chart_svg([SEED_HISTORY[0]]))
    assert 'No benchmark recorded yet' in ''.join(t.text for t in root.iter(SVG + 'text'))


def test_chart_needs_a_list():
    with pytest.raises(ReportError):
        throughput_chart_svg({'event': 'benchmark'})


@pytest.mark.parametrize('link, cls', [
    ('X', 'self'), ('NV12', 'nvlink'), ('PIX', 'switch'), ('PXB', 'switch'), ('PHB', 'hostbridge'),
    ('NODE', 'hostbridge'), ('SYS', 'crossnuma'), ('???', 'unknown'),
])
def test_link_classes(link, cls):
    assert link_class(link) == cls


def test_grid_classifies_links_and_shows_p2p():
    grid = topology_grid(PROXMOX_8GPU)
    assert grid['labels'] == ['GPU0', 'GPU1', 'GPU2']
    cell = grid['rows'][0]['cells'][1]
    assert (cell['text'], cell['cls'], cell['p2p'], cell['p2p_ok']) == ('PHB', 'hostbridge', 'r:NS', False)
    assert grid['rows'][1]['cells'][2]['p2p_ok'] is True
    assert [entry['cls'] for entry in grid['legend']] == ['self', 'nvlink', 'hostbridge', 'crossnuma']


def test_grid_accepts_a_mapping_matrix():
    facts = {'gpu_links': {'0': {'0': 'X', '1': 'PHB'}, '1': {'0': 'PHB', '1': 'X'}}}
    assert [c['text'] for c in topology_grid(facts)['rows'][1]['cells']] == ['PHB', 'X']


def test_grid_rejects_a_matrix_it_cannot_read():
    with pytest.raises(ReportError):
        topology_grid({'gpu_links': 'PHB'})


def test_text_aligns_the_matrix_and_explains_the_advice():
    lines = topology_text(PROXMOX_8GPU)
    assert lines[0] == 'GPUs: 3 x NVIDIA RTX PRO 6000 Blackwell Server Edition'
    header, row0 = lines[1], lines[2]
    assert header.index('GPU1') + len('GPU1') == row0.index('PHB') + len('PHB')
    assert 'FlashInfer allreduce fusion: NOT advised' in lines
    assert '  - GPU pairs without P2P: allreduce fusion needs peer-to-peer access' in lines
    assert '  NCCL_P2P_LEVEL=5' in lines
    assert 'Weakest link: SYS' in lines
    assert '  --disable-custom-all-reduce' in lines and '  --tp-size 8' in lines


def test_redact_masks_secrets_only():
    shown = redact({'SGLANG_API_KEY': 'sk-123', 'HF_TOKEN': 'hf_x', 'api-key': 'y', 'NCCL_P2P_LEVEL': '5',
                    'HF_TOKEN_UNSET': ''})
    assert shown == {'SGLANG_API_KEY': REDACTED, 'HF_TOKEN': REDACTED, 'api-key': REDACTED,
                     'NCCL_P2P_LEVEL': '5', 'HF_TOKEN_UNSET': ''}


def test_redact_masks_every_name_the_input_check_calls_a_secret():
    # The server role publishes its environment through redact() alone: its markers must cover them all.
    from ansible_collections.inferops.serving.plugins.module_utils._secrets import SECRET_ENV_NAMES

    shown = redact(dict((name, 'value') for name in SECRET_ENV_NAMES))
    assert shown == dict((name, REDACTED) for name in SECRET_ENV_NAMES)


def test_the_report_card_shows_the_running_configuration_else_the_last_baseline():
    records = [
        {'event': 'deploy', 'fingerprint': 'a', 'experiment': None},
        {'event': 'benchmark', 'fingerprint': 'a', 'experiment': None, 'metrics': {'output_throughput': 1867.0}},
        {'event': 'deploy', 'fingerprint': 'b', 'experiment': 'fused'},
        {'event': 'benchmark', 'fingerprint': 'b', 'experiment': 'fused', 'metrics': {'output_throughput': 236.0}},
        {'event': 'deploy', 'fingerprint': 'c', 'experiment': None, 'server': {'model': 'glm-5'}},
    ]
    view = report_view(records, {'deploy': records[-1]})
    assert not view['bench_is_current'] and view['metrics']['output_throughput'] == 1867.0
    assert view['server'] == {'model': 'glm-5'} and view['running_experiment'] is None
    view = report_view(records[:4], {'deploy': records[2]})
    assert view['bench_is_current'] and view['metrics']['output_throughput'] == 236.0
    assert view['running_experiment'] == 'fused'
    assert report_view([], {})['last_bench'] is None


def test_chart_draws_the_spread_of_repeated_runs():
    from ansible_collections.inferops.serving.plugins.module_utils._report import throughput_chart_svg
    records = [{'event': 'benchmark', 'epoch': 1000.0, 'experiment': None,
                'metrics': {'output_throughput': 1866.0, 'gpu': {'mean_power_w': 250.0, 'power_limit_w': 600.0},
                            'spread': {'output_throughput': {'n': 3, 'mean': 1866.0, 'stdev': 27.5,
                                                             'min': 1838.0, 'max': 1893.0}}}},
               {'event': 'experiment', 'epoch': 1100.0, 'experiment': 'lab_within_noise', 'outcome': 'inconclusive'}]
    svg = throughput_chart_svg(records)
    assert '+/- 27.5 over 3 runs (min 1838.0, max 1893.0)' in svg
    assert 'lab_within_noise: inconclusive' in svg and '#f9a825' in svg


@pytest.mark.parametrize('positions', [
    [100.0, 101.0, 102.0, 103.0, 104.0],        # five events within seconds of each other
    [100.0, 160.0, 220.0, 280.0, 860.0, 880.0],  # a run of events, and two at the right edge
    [450.0] * 4,                                 # the same instant
])
def test_event_labels_that_would_touch_go_on_separate_rows(positions):
    widths = [150.0] * len(positions)
    placed = layout_labels(positions, widths, 4, 896)
    for n, (row, _anchor, _x, left, right) in enumerate(placed):
        assert 4 <= left and right <= 896
        for other_row, _a, _x2, other_left, other_right in placed[n + 1:]:
            if other_row == row:
                assert right + LABEL_GAP <= other_left or other_right + LABEL_GAP <= left


def test_event_labels_far_apart_share_the_first_row_and_the_last_ends_at_its_line():
    placed = layout_labels([100.0, 400.0, 880.0], [150.0, 150.0, 150.0], 4, 896)
    assert [p[0] for p in placed] == [0, 0, 0]
    assert placed[2][1] == 'end' and placed[2][2] == 876.0


def test_the_chart_grows_a_label_row_per_close_event_and_no_label_row_is_shared_by_neighbours():
    close = SEED_HISTORY + [
        {'event': 'experiment', 'epoch': T0 + 471, 'experiment': 'other', 'outcome': 'refused'},
        {'event': 'campaign', 'epoch': T0 + 472, 'campaign': 'tune', 'kept': []}]
    root = parse(throughput_chart_svg(close))
    labels = [t for t in root.iter(SVG + 'text') if t.get('class') == 'event-label']
    assert [t.text for t in labels] == ['rollback to baseline', 'sm120_allreduce_fusion: rolled back',
                                        'other: refused', 'campaign tune: baseline kept']
    assert len(set(t.get('y') for t in labels)) == 4


@pytest.mark.parametrize('record, words, change', [
    ({'experiment': 'x', 'outcome': 'refused', 'blocked_by': ['no P2P']}, 'refused', None),
    ({'experiment': 'x', 'outcome': 'rolled_back', 'reason': 'failed', 'change_pct': None}, 'failed, rolled back', None),
    ({'experiment': 'x', 'outcome': 'rolled_back', 'reason': 'regression', 'change_pct': -12.0, 'noise_pct': 3.1},
     'rolled back', '-12.0% (noise +/- 3.1%)'),
    ({'experiment': 'x', 'outcome': 'kept', 'layer': 'host', 'message': 'P2P on every pair'}, 'kept', None),
])
def test_the_last_experiment_card_reads_every_outcome(record, words, change):
    view = report_view([dict(record, event='experiment', epoch=T0)], {'experiment': dict(record, epoch=T0)})
    assert view['last_experiment']['words'] == words
    assert view['last_experiment']['change'] == change


def test_an_experiment_deployed_without_a_verdict_says_so():
    deploy = {'event': 'deploy', 'epoch': T0 + 10, 'experiment': 'long', 'fingerprint': 'f'}
    earlier = {'event': 'experiment', 'epoch': T0, 'experiment': 'long', 'outcome': 'refused'}
    view = report_view([earlier, deploy], {'deploy': deploy, 'experiment': earlier})
    assert view['last_experiment']['outcome'] == 'no_verdict'
