# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the report's cards and history table show, picked from a node's history.

Every record kind the roles write reads here with the fields it has: a refused experiment
records no figures, a host experiment no throughput change, a failed one no candidate, a
rollback says how the baseline came back, a campaign lists its steps. The template only
prints what these functions return.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._report import kept_words, outcome_words


def _number(value, fmt):
    """``value`` formatted, or None when it is not a number (a record may lack the figure)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return fmt.format(float(value))
    except (TypeError, ValueError):
        return None


def _short(text, limit=240):
    text = ' '.join(('%s' % (text,)).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + '\u2026'


_PILLS = {'kept': 'ok', 'rolled_back': 'bad', 'inconclusive': 'warn', 'refused': 'gray', 'no_verdict': 'warn'}


def experiment_card(record, rollback=None, open_experiment=None):
    """The last-experiment card: every outcome the roles record, and an experiment with no verdict.

    ``record`` is the newest experiment record (refused ones carry no figures, host experiments
    no throughput change, failed ones no candidate); ``rollback`` the newest rollback record;
    ``open_experiment`` the experiment the newest deploy runs when no verdict followed it (a run
    stopped before its gate, or one that is still measuring).
    """
    if open_experiment:
        return {'name': open_experiment, 'outcome': 'no_verdict', 'pill': _PILLS['no_verdict'],
                'words': 'no verdict recorded', 'change': None, 'ts': None, 'recovery_s': None,
                'detail': 'the node runs this experiment, and no outcome was recorded after its deploy: '
                          'a run that is still measuring, or one stopped before its gate '
                          '(run playbooks/experiment.yml again, or deploy.yml to go back to the baseline)'}
    if not record:
        return None
    outcome = record.get('outcome') or 'kept'
    change = _number(record.get('change_pct'), '{0:+.1f}%')
    noise = _number(record.get('noise_pct'), '{0:.1f}%')
    if outcome == 'refused':
        detail = '; '.join('%s' % b for b in record.get('blocked_by') or []) or 'refused before anything changed'
    else:
        detail = record.get('message') or record.get('reason') or ''
    recovery = None
    if rollback and rollback.get('experiment') == record.get('experiment') and outcome != 'kept':
        recovery = rollback.get('recovery_s')
    return {'name': record.get('experiment') or 'experiment', 'outcome': outcome,
            'pill': _PILLS.get(outcome, 'gray'), 'words': outcome_words(record),
            'change': change if change is None or noise is None else '%s (noise +/- %s)' % (change, noise),
            'ts': record.get('ts'), 'recovery_s': recovery, 'detail': _short(detail),
            'layer': record.get('layer') or 'server', 'campaign': record.get('campaign')}


def _benchmark_detail(record):
    metrics = record.get('metrics') or {}
    parts = [(_number(metrics.get('output_throughput'), '{0:,.1f}') or '?') + ' tok/s']
    spread = (metrics.get('spread') or {}).get('output_throughput') or {}
    if spread.get('stdev') is not None:
        parts[0] += ' +/- %s (%s runs, %s-%s)' % (
            spread.get('stdev'), spread.get('n'), spread.get('min'), spread.get('max'))
    if metrics.get('tokens_per_joule') is not None:
        parts.append('%s tok/J' % metrics['tokens_per_joule'])
    parts.append('TTFT %s ms' % metrics.get('median_ttft_ms', '?'))
    parts.append('TPOT %s ms' % metrics.get('median_tpot_ms', '?'))
    power = (metrics.get('gpu') or {}).get('mean_power_w')
    if power is not None:
        parts.append('%s W' % power)
    workload = record.get('workload')
    if isinstance(workload, dict) and workload:
        parts.append('workload ' + ', '.join('%s=%s' % kv for kv in sorted(workload.items())))
    return ', '.join(parts)


def _deploy_detail(record):
    text = 'configuration %s' % ('%s' % (record.get('fingerprint') or '?'))[:12]
    versions = record.get('versions') or {}
    if record.get('release_set'):
        text += ', release set %s (sglang %s)' % (record['release_set'], versions.get('sglang', '?'))
    if record.get('sm120_allreduce_fusion_patch'):
        text += ', patch applied'
    return text


def _campaign_detail(record):
    rows = record.get('rows') or []
    steps = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        change = _number(row.get('change_pct'), ' {0:+.1f}%') or ''
        steps.append('%s %s%s' % (row.get('experiment') or '?', ('%s' % (row.get('verdict') or '?')).replace('_', ' '),
                                  change))
    text = '%s: %s' % (record.get('campaign') or 'campaign', kept_words(record.get('kept')))
    if record.get('objective'):
        text += ' (objective %s)' % record['objective']
    if steps:
        text += '; ' + '; '.join(steps)
    return text


def history_rows(records, limit=25):
    """The history table, newest first: time, event, experiment and a one-line detail per record.

    Every record kind the roles write reads here, with the fields it has: a refused experiment
    has no figures, a host experiment no throughput, a rollback says how the baseline came back.
    """
    rows = []
    for record in list(reversed(records or []))[:limit]:
        event = record.get('event')
        if event == 'benchmark':
            detail = _benchmark_detail(record)
        elif event == 'experiment':
            card = experiment_card(record)
            detail = card['words']
            if card['change']:
                detail += ' ' + card['change']
            if card['detail']:
                detail += ': ' + card['detail']
            if record.get('layer') == 'host':
                detail = 'host %s, VM %s: %s' % (record.get('host', '?'), record.get('vmid', '?'), detail)
        elif event == 'rollback':
            detail = _short(record.get('message') or record.get('reason') or 'rolled back')
            if record.get('how'):
                detail += '; %s' % record['how']
            detail += '; healthy baseline after %s s' % (record.get('recovery_s', '?'),)
        elif event == 'deploy':
            detail = _deploy_detail(record)
        elif event == 'campaign':
            detail = _short(_campaign_detail(record), 400)
        else:
            detail = ''
        rows.append({'ts': record.get('ts') or '', 'event': event or '',
                     'experiment': record.get('experiment') or record.get('campaign') or '', 'detail': detail})
    return rows


def report_view(records, latest):
    """What the report's cards show, picked from the node's history.

    The card shows the server as it runs now: the newest benchmark of the deployed configuration
    (same fingerprint), else the newest baseline one; a rolled-back experiment's result is only
    in the chart.
    """
    latest = latest or {}
    records = records or []
    deploy = latest.get('deploy') or {}
    benchmarks = [r for r in records if r.get('event') == 'benchmark']
    fingerprint = deploy.get('fingerprint') or ''
    current = [r for r in benchmarks if 'fingerprint' in r and r['fingerprint'] == fingerprint]
    baselines = [r for r in benchmarks if not r.get('experiment')]
    last_bench = current[-1] if current else (baselines[-1] if baselines else None)
    metrics = (last_bench or {}).get('metrics') or {}
    last_experiment = latest.get('experiment')
    running = deploy.get('experiment')
    # The deploy of an experiment is followed by its verdict; none after it means no gate spoke.
    open_experiment = None
    if running and not (last_experiment and last_experiment.get('experiment') == running
                        and float(last_experiment.get('epoch') or 0) >= float(deploy.get('epoch') or 0)):
        open_experiment = running
    spread = (metrics.get('spread') or {}).get('output_throughput') or {}
    throughput = {
        'value': _number(metrics.get('output_throughput'), '{0:,.0f}'),
        'spread': None if spread.get('stdev') is None else '+/- %s over %s runs (%s-%s)' % (
            _number(spread.get('stdev'), '{0:,.1f}'), spread.get('n'), _number(spread.get('min'), '{0:,.0f}'),
            _number(spread.get('max'), '{0:,.0f}')),
        'per_joule': _number(metrics.get('tokens_per_joule'), '{0:.3f}'),
    }
    return {
        'deploy': deploy,
        'server': deploy.get('server') or {},
        'last_bench': last_bench,
        'bench_is_current': bool(current),
        'metrics': metrics,
        'throughput': throughput,
        'gpu': metrics.get('gpu') or {},
        'last_experiment': experiment_card(last_experiment, latest.get('rollback'), open_experiment),
        'running_experiment': running,
        'history': history_rows(records),
    }
