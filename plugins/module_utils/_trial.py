# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an experiment's trial measures against, records and says, as data.

The decision itself (keep, roll back, inconclusive) is ``_experiment.decide``, which ``decision``
gives the role's gate settings; the other functions turn a trial's results into the baseline it
is measured against, the history's records of the outcome and of a rollback, and the closing
words of a kept or inconclusive experiment.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._correctness import summary as answers_summary
from ansible_collections.inferops.serving.plugins.module_utils._experiment import decide


def decision(planned, gate, baseline_result, candidate, healthy=True, error=None, lock=None):
    """The benchmark gate's decision on a trial (``_experiment.decide``). ``gate`` holds the role's
    settings: ``max_regression``, ``objective``, ``min_effect`` and ``inconclusive``; an experiment
    that says what its own inconclusive result does (``planned['inconclusive']``: an upgrade is kept
    when it is neither slower nor answers differently) overrides the gate's."""
    return decide(baseline_result, candidate, gate['max_regression'], healthy, error=error,
                  objective=gate['objective'], min_effect=gate['min_effect'],
                  inconclusive=planned.get('inconclusive') or gate['inconclusive'], lock=lock)


def baseline(history_benchmark, measured, now):
    """The result an experiment is measured against: the history's recent benchmark of the running
    configuration when there is one, else the one measured now (``measured``, None in --check,
    which measures nothing). Returns ``metrics``, ``age_s`` (0: measured now) and the ``message`` that says so."""
    if history_benchmark is not None:
        metrics = history_benchmark['metrics']
        age_s = int(round(float(now) - float(history_benchmark['epoch'])))
    elif measured is not None:
        metrics = measured
        age_s = 0
    else:
        return {'metrics': {}, 'age_s': 0, 'message': 'Baseline: not measured (check mode sends the server no load).'}
    return {
        'metrics': metrics,
        'age_s': age_s,
        'message': 'Baseline: %s output tok/s (%s).' % (
            metrics.get('output_throughput', 'n/a'),
            'measured now' if age_s == 0 else 'from the history, %s s old' % age_s),
    }


def restores_by_files(snapshot, before_url, deployment):
    """Whether a rollback tries the files alone first: the deploy record's files were kept before
    the trial, and the server answers where it answered before (a trial that moved it converges)."""
    return bool((snapshot or {}).get('snapshot')) and (deployment or {}).get('url', '') == before_url


def outcome_record(planned, decision, baseline_result, candidate, lock=None, campaign=None, forced=False):
    """The history's ``experiment`` record: the verdict, both results and the correctness lock."""
    baseline_result = baseline_result or {}
    candidate = candidate or {}
    return {
        'experiment': planned['name'],
        'campaign': campaign,
        'outcome': decision['verdict'],
        'forced': bool(forced),
        'reason': decision['reason'],
        'objective': decision['objective'],
        'change_pct': decision['change_pct'],
        'noise_pct': decision['noise_pct'],
        'baseline_throughput': baseline_result.get('output_throughput'),
        'experiment_throughput': candidate.get('output_throughput'),
        'baseline_spread': baseline_result.get('spread'),
        'experiment_spread': candidate.get('spread'),
        'baseline_tokens_per_joule': baseline_result.get('tokens_per_joule'),
        'experiment_tokens_per_joule': candidate.get('tokens_per_joule'),
        'answers': answers_summary(lock),
        'message': decision['message'],
    }


def rollback_record(planned, decision, error, fingerprint, restore, candidate_done, now):
    """The history's ``rollback`` record: why, how (files put back, or a converge), and the recovery
    time from the end of the experiment's benchmark to the configuration before it answering again."""
    restore = restore or {}
    return {
        'experiment': planned['name'],
        'reason': decision['reason'],
        'message': decision['message'],
        'error': error,
        'fingerprint': fingerprint,
        'how': 'files put back: %s' % ', '.join(restore['files']) if restore.get('restored') else 'converged',
        'recovery_s': round(float(now) - float(candidate_done), 1),
    }


def _check_results(registered):
    """The per-rank results of a registered nccl_allreduce_check (empty when it did not run)."""
    facts = (registered or {}).get('ansible_facts') or {}
    return (facts.get('nccl_allreduce_check') or {}).get('results') or []


def host_outcome_record(planned, verdict, vm_host, vmid, before=None, after=None):
    """The history's ``experiment`` record of a host experiment (``host_decide``'s ``verdict``) on VM
    ``vmid`` of ``vm_host``, with the all-reduce check's results before and after the change (the
    registered checks; after is absent when a step before it failed)."""
    return {
        'experiment': planned['name'],
        'outcome': 'kept' if verdict['keep'] else 'rolled_back',
        'layer': 'host',
        'host': vm_host,
        'vmid': int(vmid),
        'message': verdict['reason'],
        'evidence': verdict['evidence'],
        'allreduce_before': _check_results(before),
        'allreduce_after': _check_results(after),
    }


def host_rollback_record(planned, verdict, vm_host, vmid, started, now):
    """The history's ``rollback`` record of a host experiment: the inventory's passthrough back on the
    host, with the time from the verdict (``started``) to the guest answering again on it."""
    return {
        'experiment': planned['name'],
        'reason': 'wrong_or_no_p2p',
        'message': verdict['reason'],
        'evidence': verdict['evidence'],
        'host': vm_host,
        'vmid': int(vmid),
        'recovery_s': round(float(now) - float(started), 1),
    }


def report(planned, decision, node):
    """What the run says of an experiment that stays or was inconclusive; None for a rollback,
    whose closing message says it (``_closing.experiment``)."""
    if not decision:
        return None
    if decision['verdict'] == 'inconclusive':
        return ('Experiment %s inconclusive on %s: %s. %s More repeats (serving_benchmark_repeats) narrow the noise.'
                % (planned['name'], node, decision['message'],
                   'The baseline is running again.' if decision['action'] == 'rollback'
                   else 'It stays until the next deploy.yml.'))
    if decision['verdict'] == 'kept':
        return ('Experiment %s kept on %s: %s. It stays until the next deploy.yml; to make it the baseline, '
                'put its variables in the inventory.' % (planned['name'], node, decision['message']))
    return None
