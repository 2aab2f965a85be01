# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Campaigns: checked before anything changes; a table and a host_vars promotion at the end."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils._campaign import (
    CampaignError,
    plan,
    promotion,
    row,
    start,
    step,
    table,
)

EXPERIMENTS = {'max_running_requests_2048': {}, 'nccl_min_nchannels_16': {}, 'nccl_min_nchannels_4': {},
               'sm120_allreduce_fusion': {}}
CAMPAIGNS = {'pcie_throughput': {'description': 'd', 'experiments': ['max_running_requests_2048',
                                                                     'nccl_min_nchannels_16', 'nccl_min_nchannels_4']}}


def test_plan_lists_the_experiments_in_order():
    assert plan(CAMPAIGNS, 'pcie_throughput', EXPERIMENTS)['experiments'] == [
        'max_running_requests_2048', 'nccl_min_nchannels_16', 'nccl_min_nchannels_4']


@pytest.mark.parametrize('campaigns, name, message', [
    (CAMPAIGNS, '', 'say which campaign to run: -e serving_campaign=<name>; known: pcie_throughput'),
    (CAMPAIGNS, 'pcie', "unknown campaign 'pcie'"),
    ({'c': {'experiments': ['nccl_min_nchannels_8']}}, 'c', 'names unknown experiments: nccl_min_nchannels_8'),
    ({'c': {'experiments': []}}, 'c', 'must be a non-empty list'),
    ({'c': {'experiments': 'nccl_min_nchannels_4'}}, 'c', 'must be a non-empty list'),
    ({'c': {'experiments': ['nccl_min_nchannels_4'], 'steps': 1}}, 'c', 'unknown keys steps'),
    ({'c': {'experiments': ['nccl_min_nchannels_4', 'nccl_min_nchannels_4']}}, 'c', 'twice'),
])
def test_bad_campaigns_fail_before_anything_changes(campaigns, name, message):
    with pytest.raises(CampaignError, match=message.replace('(', r'\(').replace(')', r'\)')):
        plan(campaigns, name, EXPERIMENTS)


def _bench(mean, stdev):
    return {'output_throughput': mean, 'tokens_per_joule': mean / 2000.0,
            'spread': {'output_throughput': {'n': 3, 'mean': mean, 'stdev': stdev}}}


def test_table_shows_each_verdict_and_the_overall_gain():
    rows = [
        row({'verdict': 'kept', 'change_pct': 12.0, 'noise_pct': 3.1}, 'max_running_requests_2048',
            _bench(1867.0, 20.0), _bench(2091.0, 15.0), {'agreement': 1.0}),
        row({'verdict': 'rolled_back', 'change_pct': -7.9, 'noise_pct': 2.5}, 'nccl_min_nchannels_4',
            _bench(2091.0, 15.0), _bench(1925.0, 18.0), {'agreement': 1.0}),
        {'experiment': 'sm120_allreduce_fusion', 'verdict': 'refused', 'reason': 'allreduce_fusion_advised is false'},
    ]
    lines = table(rows, 'pcie_throughput', 'gpu-node', _bench(1867.0, 20.0), _bench(2091.0, 15.0))
    assert lines[0] == 'Campaign pcie_throughput on gpu-node (objective output_throughput):'
    assert lines[2].split()[:3] == ['max_running_requests_2048', 'kept', '2,091.0']
    assert '+12.0%' in lines[2] and '100%' in lines[2]
    assert lines[3].split()[:3] == ['nccl_min_nchannels_4', 'rolled', 'back']
    assert 'refused' in lines[4] and 'allreduce_fusion_advised is false' in lines[4]
    assert lines[-1] == 'Baseline 1,867.0 tok/s -> best 2,091.0 tok/s (+12.0%).'


def test_promotion_is_valid_host_vars_that_keeps_strings_strings():
    text = promotion({'sglang_server_extra_args': {'max-running-requests': 2048},
                      'sglang_server_extra_env': {'NCCL_MIN_NCHANNELS': '16', 'PYTHONPATH': '/opt/x'}},
                     'pcie_throughput', 'gpu-node', ['max_running_requests_2048', 'nccl_min_nchannels_16'])
    assert text.startswith('# host_vars/gpu-node.yml - campaign pcie_throughput kept max_running_requests_2048, '
                           'nccl_min_nchannels_16.')
    assert yaml.safe_load(text) == {'sglang_server_extra_args': {'max-running-requests': 2048},
                                    'sglang_server_extra_env': {'NCCL_MIN_NCHANNELS': '16', 'PYTHONPATH': '/opt/x'}}


def test_a_campaign_that_kept_nothing_has_nothing_to_promote():
    assert promotion({}, 'pcie_throughput', 'gpu-node', []) == (
        'Campaign pcie_throughput: no experiment beat the baseline; nothing to promote.\n')


def _planned(name, overlay=None, refused=False, blocked_by=()):
    return {'name': name, 'overlay': overlay or {}, 'refused': refused, 'blocked_by': list(blocked_by)}


def test_a_campaign_goes_from_the_baseline_through_a_winner_a_loser_and_a_refusal_to_its_promotion():
    baseline, faster, slower = _bench(1867.0, 20.0), _bench(2091.0, 15.0), _bench(1925.0, 18.0)
    campaign = start(None, baseline, 1.0)
    assert campaign == {'start': baseline, 'best': baseline, 'best_experiment': None, 'kept': [], 'rows': [],
                        'promotion': {}, 'message': 'Baseline: 1867.0 output tok/s (measured now).'}
    campaign = step(campaign, _planned('max_running_requests_2048',
                                       {'sglang_server_extra_args': {'max-running-requests': 2048}}),
                    {'verdict': 'kept', 'action': 'keep', 'change_pct': 12.0}, faster, {'agreement': 1.0})
    campaign = step(campaign, _planned('nccl_min_nchannels_4', {'sglang_server_extra_env': {'NCCL_MIN_NCHANNELS': '4'}}),
                    {'verdict': 'rolled_back', 'action': 'rollback', 'change_pct': -7.9}, slower, {'agreement': 1.0})
    campaign = step(campaign, _planned('sm120_allreduce_fusion', refused=True,
                                       blocked_by=['allreduce_fusion_advised is false', 'no P2P']))
    assert campaign['start'] == baseline
    assert campaign['best'] == faster and campaign['best_experiment'] == 'max_running_requests_2048'
    assert campaign['kept'] == ['max_running_requests_2048']
    assert campaign['promotion'] == {'sglang_server_extra_args': {'max-running-requests': 2048}}
    assert [(each['experiment'], each['verdict']) for each in campaign['rows']] == [
        ('max_running_requests_2048', 'kept'), ('nccl_min_nchannels_4', 'rolled_back'),
        ('sm120_allreduce_fusion', 'refused')]
    # Each is measured against the best so far: the loser against the winner, not the baseline.
    assert campaign['rows'][1]['against'] == 2091.0
    assert campaign['rows'][2]['reason'] == 'allreduce_fusion_advised is false; no P2P'


def test_an_experiment_alone_starts_from_a_recent_result_in_the_history_and_says_how_old_it_is():
    recent = {'metrics': _bench(1867.0, 20.0), 'epoch': 1000.0}
    campaign = start(recent, None, 1422.0)
    assert campaign['start'] == campaign['best'] == recent['metrics']
    assert campaign['message'] == 'Baseline: 1867.0 output tok/s (from the history, 422 s old).'


def test_a_later_winner_replaces_the_variables_it_sets_and_keeps_the_earlier_winners():
    first = _planned('a', {'sglang_server_extra_env': {'X': '1'}, 'sglang_server_extra_args': {'y': 2}})
    campaign = step(start(None, _bench(1000.0, 5.0), 1.0), first, {'verdict': 'kept', 'action': 'keep'}, _bench(1100.0, 5.0))
    campaign = step(campaign, _planned('b', {'sglang_server_extra_env': {'X': '1', 'Z': '3'}}),
                    {'verdict': 'kept', 'action': 'keep'}, _bench(1200.0, 5.0))
    assert campaign['kept'] == ['a', 'b'] and campaign['best_experiment'] == 'b'
    assert campaign['promotion'] == {'sglang_server_extra_env': {'X': '1', 'Z': '3'}, 'sglang_server_extra_args': {'y': 2}}


def test_a_step_without_a_decision_check_mode_changes_nothing():
    campaign = start(None, None, 1.0)
    assert step(campaign, _planned('a', {'x': 1})) is campaign
    assert campaign['best'] == {}
