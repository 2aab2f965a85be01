# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Campaigns are data: a name and a list of experiments, tried one after another.

    serving_campaigns:
      pcie_throughput:
        description: What a PCIe-only node gains from more requests in flight and NCCL channels
        experiments: [max_running_requests_2048, nccl_min_nchannels_16, nccl_min_nchannels_4]

Each experiment is measured against the best configuration so far; a winner stays laid over the
inventory for the next one. The result is a table and the inventory change that promotes the
winner (``promotion``).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json

from ansible_collections.inferops.serving.plugins.module_utils._experiment import entry_problem, is_mapping
from ansible_collections.inferops.serving.plugins.module_utils._trial import baseline as trial_baseline

ENTRY_KEYS = ('description', 'experiments')
UNITS = {'output_throughput': 'tok/s', 'tokens_per_joule': 'tok/J'}


class CampaignError(Exception):
    """A campaign that does not exist or is not well defined."""


def plan(campaigns, name, experiments):
    """Check campaign ``name`` and every experiment it names before anything changes."""
    if not is_mapping(campaigns):
        raise CampaignError('serving_campaigns must be a mapping of name to campaign, got %s'
                            % type(campaigns).__name__)
    known = ', '.join(sorted(campaigns.keys())) or 'none'
    if not name:
        raise CampaignError('say which campaign to run: -e serving_campaign=<name>; known: %s' % known)
    if name not in campaigns:
        raise CampaignError('unknown campaign %r; known: %s (add it to serving_campaigns)' % (name, known))
    entry = campaigns[name]
    where = 'serving_campaigns.%s' % name
    problem = entry_problem(entry, where, ENTRY_KEYS)
    if problem:
        raise CampaignError(problem)
    steps = entry.get('experiments')
    if isinstance(steps, (str, bytes)) or not steps or not all(isinstance(s, str) for s in steps):
        raise CampaignError('%s.experiments must be a non-empty list of experiment names' % where)
    missing = [s for s in steps if s not in (experiments or {})]
    if missing:
        known_experiments = ', '.join(sorted((experiments or {}).keys()))
        raise CampaignError('%s.experiments names unknown experiments: %s; known: %s (add them to '
                            'serving_experiments)' % (where, ', '.join(missing), known_experiments))
    if len(set(steps)) != len(steps):
        raise CampaignError('%s.experiments lists an experiment twice: %s' % (where, ', '.join(steps)))
    return {'name': name, 'description': entry.get('description') or '', 'experiments': list(steps)}


def _value(result, objective):
    result = result or {}
    spread = (result.get('spread') or {}).get(objective) or {}
    mean = spread.get('mean') if spread.get('mean') is not None else result.get(objective)
    return mean, spread.get('stdev')


def row(decision, experiment, best, candidate, lock=None, objective='output_throughput'):
    """One line of the campaign table, from the trial's decision."""
    decision = decision or {}
    mean, stdev = _value(candidate, objective)
    best_mean = _value(best, objective)[0]
    return {
        'experiment': experiment,
        'verdict': decision.get('verdict'),
        'reason': decision.get('reason'),
        'value': mean,
        'stdev': stdev,
        'against': best_mean,
        'change_pct': decision.get('change_pct'),
        'noise_pct': decision.get('noise_pct'),
        'agreement': None if not lock else lock.get('agreement'),
        'tokens_per_joule': (candidate or {}).get('tokens_per_joule'),
    }


def start(recent, measured, now):
    """A campaign before its first experiment (an experiment on its own is a campaign of one): its
    baseline (``_trial.baseline``: ``recent``, the history's recent result of the running
    configuration, else ``measured``, None in --check) is where it starts and the best so far;
    nothing kept, no rows, nothing to promote. ``message`` says which baseline it is."""
    chosen = trial_baseline(recent, measured, now)
    return {'start': chosen['metrics'], 'best': chosen['metrics'], 'best_experiment': None, 'kept': [], 'rows': [],
            'promotion': {}, 'message': chosen['message']}


def step(state, planned, decision=None, candidate=None, lock=None, objective='output_throughput'):
    """The campaign after one experiment (``planned``, from experiment_plan): a row for it, and a
    winner (``decision`` action ``keep``) as the best so far, its variables laid over the promotion
    (a mapping's overlay already holds the inventory's entries and earlier winners'). A refused
    experiment is a row with what blocked it; without a decision (check mode) nothing changes."""
    name = planned['name']
    if planned.get('refused'):
        refused = {'experiment': name, 'verdict': 'refused', 'reason': '; '.join(planned.get('blocked_by') or [])}
        return dict(state, rows=state['rows'] + [refused])
    if decision is None:
        return state
    after = dict(state, rows=state['rows'] + [row(decision, name, state['best'], candidate, lock, objective)])
    if decision.get('action') == 'keep':
        after.update(best=candidate or {}, best_experiment=name, kept=state['kept'] + [name],
                     promotion=dict(state['promotion'], **planned.get('overlay', {})))
    return after


def _num(value, digits=1):
    if value is None:
        return '-'
    return '{0:,.{1}f}'.format(value, digits)


def table(rows, name, node, start, best, objective='output_throughput'):
    """The campaign as text: one line per experiment, then the start and the end."""
    digits = 3 if objective == 'tokens_per_joule' else 1
    unit = UNITS.get(objective, '')
    header = ('experiment', 'verdict', '%s (%s)' % (objective, unit), 'vs best', 'change', 'noise', 'answers', 'tok/J')
    lines = []
    for entry in rows:
        if entry.get('verdict') == 'refused':
            lines.append((entry['experiment'], 'refused', entry.get('reason') or '', '', '', '', '', ''))
            continue
        value = '-'
        if entry.get('value') is not None:
            value = '%s +/- %s' % (_num(entry['value'], digits), _num(entry.get('stdev'), digits))
        lines.append((
            entry['experiment'], (entry.get('verdict') or '-').replace('_', ' '), value,
            _num(entry.get('against'), digits),
            '-' if entry.get('change_pct') is None else '%+.1f%%' % entry['change_pct'],
            '-' if entry.get('noise_pct') is None else '+/-%.1f%%' % entry['noise_pct'],
            '-' if entry.get('agreement') is None else '%.0f%%' % (entry['agreement'] * 100.0),
            _num(entry.get('tokens_per_joule'), 3)))
    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]
    text = ['Campaign %s on %s (objective %s):' % (name, node, objective),
            '  '.join(str(h).ljust(w) for h, w in zip(header, widths))]
    text.extend('  '.join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines)
    start_value = _value(start, objective)[0]
    best_value = _value(best, objective)[0]
    if start_value and best_value:
        gain = (best_value - start_value) * 100.0 / start_value
        text.append('Baseline %s %s -> best %s %s (%+.1f%%).'
                    % (_num(start_value, digits), unit, _num(best_value, digits), unit, gain))
    return text


def promotion(variables, name, node, kept):
    """host_vars YAML that makes the campaign's best configuration the inventory's baseline.

    ``variables`` are the kept experiments' variables with their final values (mappings hold
    the inventory's entries too, so the snippet replaces them whole). JSON-style values are
    valid YAML and keep strings such as "16" strings. Without a kept experiment: one line saying that
    there is nothing to promote.
    """
    if not kept:
        return 'Campaign %s: no experiment beat the baseline; nothing to promote.\n' % name
    lines = ['# host_vars/%s.yml - campaign %s kept %s.' % (node, name, ', '.join(kept)),
             '# Commit this to make it the baseline; deploy.yml then runs it.']
    for key in sorted(variables.keys()):
        value = variables[key]
        if is_mapping(value) and len(value):
            lines.append('%s:' % key)
            for sub in sorted(value.keys()):
                lines.append('  %s: %s' % (sub, json.dumps(value[sub], sort_keys=True)))
        else:
            lines.append('%s: %s' % (key, json.dumps(value, sort_keys=True)))
    return '\n'.join(lines) + '\n'
