# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The noise-aware gate: repeated runs, their spread, and kept / rolled back / inconclusive."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import re

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._experiment import ExperimentError, decide, noise
from ansible_collections.inferops.serving.plugins.module_utils._trial import decision as trial_decision
from ansible_collections.inferops.serving.plugins.module_utils._serving_benchmark import (
    summarize_repeats,
    tokens_per_joule,
)


def _gpu(watts, count=8):
    return {'samples': 3, 'mean_power_w': watts, 'power_limit_w': 600.0, 'max_power_w': watts + 10,
            'mean_util_pct': 35.0, 'power_fraction': watts / 600.0,
            'gpus': [{'index': i, 'mean_power_w': watts, 'max_power_w': watts + 10, 'mean_util_pct': 35.0,
                      'power_limit_w': 600.0} for i in range(count)]}


def _result(throughputs, watts=250.0):
    return summarize_repeats([{'output_throughput': tp, 'completed': 64, 'failed': 0, 'duration_s': 2.0,
                               'total_output_tokens': int(tp * 2), 'gpu': _gpu(watts)} for tp in throughputs])


# The seed's node, measured three times with about 1.5% run-to-run noise.
SEED_BASELINE = _result([1867.0, 1838.0, 1893.0])
SEED_FUSION = _result([236.0, 231.0, 240.0], watts=125.0)


def test_tokens_per_joule_is_throughput_over_the_power_of_all_gpus():
    # The seed: 1,867 tok/s at 250 W on each of 8 GPUs; 236 tok/s at 125 W.
    assert tokens_per_joule(1867.0, _gpu(250.0)) == pytest.approx(0.9335)
    assert tokens_per_joule(236.0, _gpu(125.0)) == pytest.approx(0.236)
    assert tokens_per_joule(1867.0, {'gpus': []}) is None


def test_repeated_runs_keep_the_single_run_keys_as_means():
    assert SEED_BASELINE['output_throughput'] == pytest.approx(1866.0)
    assert SEED_BASELINE['repeats'] == 3 and len(SEED_BASELINE['runs']) == 3
    assert SEED_BASELINE['completed'] == 192
    assert SEED_BASELINE['spread']['tokens_per_joule']['n'] == 3
    assert SEED_BASELINE['tokens_per_joule'] == pytest.approx(0.933, abs=0.001)
    assert SEED_BASELINE['gpu']['mean_power_w'] == 250.0


def test_the_seed_regression_is_rolled_back_with_the_spread_in_the_message():
    decision = decide(SEED_BASELINE, SEED_FUSION, 0.1, True)
    assert decision['verdict'] == 'rolled_back' and decision['action'] == 'rollback'
    assert decision['reason'] == 'regression' and decision['change_pct'] == -87.4
    assert 'throughput regressed -87.4%, beyond the measured noise' in decision['message']
    assert 'baseline 1,866.0 tok/s +/- 27.5 (3 runs, 1,838.0..1,893.0)' in decision['message']
    assert 'experiment 235.7 tok/s' in decision['message']
    assert '250 W -> 125 W' in decision['message']


@pytest.mark.parametrize('gain', [0.01, 0.015, 0.02, -0.01, -0.02])
def test_a_one_or_two_percent_change_is_inconclusive_with_realistic_noise(gain):
    candidate = _result([tp * (1 + gain) for tp in (1893.0, 1840.0, 1870.0)])
    decision = decide(SEED_BASELINE, candidate, 0.1, True)
    assert decision['verdict'] == 'inconclusive', decision['message']
    assert decision['action'] == 'rollback' and 'the baseline stays' in decision['message']
    assert decision['noise_pct'] > abs(decision['change_pct'])


def test_what_inconclusive_does_is_a_setting():
    candidate = _result([1880.0, 1850.0, 1900.0])
    decision = decide(SEED_BASELINE, candidate, 0.1, True, inconclusive='keep')
    assert decision['verdict'] == 'inconclusive' and decision['action'] == 'keep'


GATE = {'max_regression': 0.1, 'objective': 'output_throughput', 'min_effect': 0.02, 'inconclusive': 'rollback'}


@pytest.mark.parametrize('planned, action', [
    ({'name': 'nccl_min_nchannels_16', 'inconclusive': None}, 'rollback'),
    ({'name': 'sglang_upgrade_0_5_23', 'inconclusive': 'keep'}, 'keep'),
])
def test_an_experiment_that_says_what_its_inconclusive_result_does_overrides_the_gate(planned, action):
    decision = trial_decision(planned, GATE, SEED_BASELINE, _result([1880.0, 1850.0, 1900.0]))
    assert decision['verdict'] == 'inconclusive' and decision['action'] == action


def test_the_trial_decision_takes_the_gate_settings_cause_and_lock():
    gate = dict(GATE, objective='tokens_per_joule', max_regression=0.05)
    decision = trial_decision({'name': 'x'}, gate, SEED_BASELINE, SEED_FUSION)
    assert decision['objective'] == 'tokens_per_joule' and decision['action'] == 'rollback'
    stopped = trial_decision({'name': 'x'}, GATE, SEED_BASELINE, None, False, 'Restart the server: exit 1')
    assert stopped['reason'] == 'failed' and stopped['message'].startswith('Restart the server: exit 1')
    changed = trial_decision({'name': 'x'}, GATE, SEED_BASELINE, _result([2090.0, 2075.0, 2110.0]),
                             lock={'ok': False, 'agreement': 0.4, 'message': 'answers parted at prompt 1'})
    assert changed['reason'] == 'answers_changed' and changed['action'] == 'rollback'


def test_a_gain_beyond_the_noise_is_kept():
    decision = decide(SEED_BASELINE, _result([2090.0, 2075.0, 2110.0]), 0.1, True)
    assert decision['verdict'] == 'kept' and decision['reason'] == 'improved'
    assert decision['change_pct'] == pytest.approx(12.1, abs=0.1)


def test_a_small_loss_beyond_the_noise_is_rolled_back():
    baseline = _result([1867.0, 1866.0, 1868.0])
    decision = decide(baseline, _result([1790.0, 1791.0, 1789.0]), 0.1, True)
    assert decision['verdict'] == 'rolled_back' and decision['reason'] == 'regression'


def test_the_minimum_effect_holds_when_the_noise_is_tiny():
    baseline = _result([1867.0, 1867.1, 1866.9])
    decision = decide(baseline, _result([1885.0, 1885.1, 1884.9]), 0.1, True, min_effect=0.02)
    assert decision['verdict'] == 'inconclusive'
    assert decide(baseline, _result([1885.0, 1885.1, 1884.9]), 0.1, True, min_effect=0.0)['verdict'] == 'kept'


def test_more_noise_widens_what_is_inconclusive():
    noisy = _result([1700.0, 2050.0, 1850.0])
    decision = decide(noisy, _result([1980.0, 1950.0, 2000.0]), 0.1, True)
    assert decision['verdict'] == 'inconclusive' and decision['noise_pct'] > 6


def test_a_single_run_baseline_borrows_the_experiment_spread():
    # A baseline from an older history record: one figure, no spread.
    margin = noise({'output_throughput': 1867.0}, _result([2090.0, 2075.0, 2110.0]))
    assert margin is not None and 0 < margin < 0.05


def test_single_runs_fall_back_to_the_tolerance():
    assert decide({'output_throughput': 1867.0}, {'output_throughput': 1700.0}, 0.1, True)['verdict'] == 'kept'
    decision = decide({'output_throughput': 1867.0}, {'output_throughput': 236.0}, 0.1, True)
    assert decision['verdict'] == 'rolled_back' and 'more than the allowed 10%' in decision['message']


def test_tokens_per_joule_as_the_objective():
    # Same speed, less power: better per joule, same per second.
    frugal = _result([1867.0, 1838.0, 1893.0], watts=200.0)
    assert decide(SEED_BASELINE, frugal, 0.1, True)['verdict'] == 'inconclusive'
    decision = decide(SEED_BASELINE, frugal, 0.1, True, objective='tokens_per_joule')
    assert decision['verdict'] == 'kept' and 'tokens per joule +25.0%' in decision['message']


def test_the_energy_objective_needs_power_readings():
    with pytest.raises(ExperimentError, match='no GPU power readings'):
        decide({'output_throughput': 1867.0}, SEED_FUSION, 0.1, True, objective='tokens_per_joule')


def test_changed_answers_roll_back_a_faster_experiment_first():
    lock = {'ok': False, 'message': 'answers changed: token agreement 19.0% is below serving_lock_min_agreement 90.0%'}
    decision = decide(SEED_BASELINE, _result([2090.0, 2075.0, 2110.0]), 0.1, True, lock=lock)
    assert decision['verdict'] == 'rolled_back' and decision['reason'] == 'answers_changed'
    assert decision['message'].startswith('answers changed: token agreement 19.0%')
    assert 'throughput +12.1%' in decision['message']


@pytest.mark.parametrize('kwargs, message', [
    ({'objective': 'latency'}, 'objective is one of output_throughput, tokens_per_joule'),
    ({'min_effect': 1.5}, 'min_effect is a fraction'),
    ({'inconclusive': 'maybe'}, 'is one of rollback, keep'),
])
def test_bad_gate_settings_say_what_is_allowed(kwargs, message):
    with pytest.raises(ExperimentError, match=message):
        decide(SEED_BASELINE, SEED_FUSION, 0.1, True, **kwargs)


README = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'docs', 'experiments.md')
README_RUNS = re.compile(r'^    baseline runs ([\d ]+) tok/s, experiment runs ([\d ]+) tok/s')


def _runs(throughputs):
    return summarize_repeats([{'output_throughput': tp, 'completed': 64, 'failed': 0, 'duration_s': 2.0,
                               'total_output_tokens': int(tp * 2)} for tp in throughputs])


def readme_gate_examples():
    """The README's gate examples: (baseline runs, experiment runs, verdict line, message line)."""
    with open(README) as handle:
        lines = handle.read().splitlines()
    examples = []
    for n, line in enumerate(lines):
        match = README_RUNS.match(line)
        if match:
            examples.append(([float(v) for v in match.group(1).split()], [float(v) for v in match.group(2).split()],
                             lines[n + 1], lines[n + 2]))
    return examples


def test_the_readme_gate_examples_are_what_the_gate_prints():
    examples = readme_gate_examples()
    assert len(examples) == 2
    for baseline_runs, experiment_runs, verdict_line, message_line in examples:
        # No GPU power in the example: the message then carries throughput alone.
        decision = decide(_runs(baseline_runs), _runs(experiment_runs), 0.1, True)
        assert verdict_line == '    -> %s' % decision['verdict']
        assert message_line == '       %s' % decision['message']
