# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Experiments are data: a name, what the topology must allow, and an overlay of role variables.

    serving_experiments:
      sm120_allreduce_fusion:
        description: FlashInfer allreduce fusion on SM120 (patched)
        requires: [allreduce_fusion_advised]     # nccl_topology facts that must be true
        vars:                                    # role variables laid over the inventory
          sglang_sm120_allreduce_fusion_patch: true
          sglang_server_extra_args:
            enable-flashinfer-allreduce-fusion: true

The baseline is the inventory without any overlay. The overlay never goes to a file: the
serving role lays it over the inventory as facts and, on rollback, sets the same variables
back to the values ``plan`` recorded before the experiment (``restore``).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import difflib
import re

ENTRY_KEYS = ('description', 'requires', 'vars')
_VAR_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


class ExperimentError(Exception):
    """An experiment that does not exist or is not well defined."""


def _is_mapping(value):
    return hasattr(value, 'keys') and hasattr(value, '__getitem__')


def merge(base, overlay):
    """Overlay ``overlay`` on ``base``: mappings merge key by key, anything else replaces."""
    if not (_is_mapping(base) and _is_mapping(overlay)):
        return overlay
    result = dict((k, base[k]) for k in base.keys())
    for key in overlay.keys():
        result[key] = merge(result[key], overlay[key]) if key in result else overlay[key]
    return result


def validate(experiments):
    """Check every entry so that a typo fails before anything on a node changes."""
    if not _is_mapping(experiments):
        raise ExperimentError('serving_experiments must be a mapping of name to experiment, got %s'
                              % type(experiments).__name__)
    for name in experiments.keys():
        entry = experiments[name]
        where = 'serving_experiments.%s' % name
        if not _is_mapping(entry):
            raise ExperimentError('%s must be a mapping with %s' % (where, ', '.join(ENTRY_KEYS)))
        unknown = sorted(k for k in entry.keys() if k not in ENTRY_KEYS)
        if unknown:
            raise ExperimentError('%s has unknown keys %s; allowed: %s'
                                  % (where, ', '.join(unknown), ', '.join(ENTRY_KEYS)))
        overlay = entry.get('vars')
        if not _is_mapping(overlay) or not overlay:
            raise ExperimentError('%s.vars must map role variables to the values the experiment uses' % where)
        bad = sorted(k for k in overlay.keys() if not _VAR_NAME.match('%s' % k))
        if bad:
            raise ExperimentError('%s.vars has keys that are not variable names: %s' % (where, ', '.join(bad)))
        requires = entry.get('requires') or []
        if isinstance(requires, (str, bytes)) or not all(isinstance(r, str) for r in requires):
            raise ExperimentError('%s.requires must be a list of nccl_topology fact names' % where)


def check_variables(name, overlay, known_variables):
    """A misspelt variable would be ignored by every role: say so before anything changes."""
    known = set(known_variables)
    for key in sorted(overlay.keys()):
        if key in known:
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1)
        raise ExperimentError('serving_experiments.%s.vars.%s is not a variable of the roles%s'
                              % (name, key, '; did you mean %s?' % close[0] if close else ''))


def _baseline_value(name, key, current, defaults):
    """The value ``key`` has without the overlay: the inventory's, else the role's default."""
    if current is not None:
        try:
            if key in current:
                return current[key]
        except Exception:  # pylint: disable=broad-except
            pass
    if defaults is not None and key in defaults:
        value = defaults[key]
        if isinstance(value, str) and '{{' in value:
            raise ExperimentError('serving_experiments.%s.vars.%s: the role derives its default (%s), which cannot '
                                  'be restored after the experiment; set %s in the inventory first'
                                  % (name, key, value, key))
        return value
    raise ExperimentError('serving_experiments.%s.vars.%s has no documented default to restore after the '
                          'experiment; set it in the inventory first' % (name, key))


def plan(experiments, name, topology, force=False, current=None, known_variables=None, defaults=None):
    """What running experiment ``name`` means on a node with these ``topology`` facts.

    ``current`` gives the node's baseline values of the overlaid variables, so that a
    mapping in the overlay (server arguments) adds to the inventory's instead of
    replacing it. ``known_variables`` (the roles' documented variables), when given,
    catches misspelt overlay keys. ``defaults`` (the roles' documented defaults), when given,
    gives ``restore``: the value of every overlaid variable before the experiment. Returns a dict with ``overlay``, ``blocked_by`` (requirements the
    topology does not meet, in words), ``reasons`` (the topology's own explanation),
    ``refused``, ``forced`` and ``restore``.
    """
    validate(experiments)
    if not name:
        raise ExperimentError('say which experiment to run: -e serving_experiment=<name>; known: %s'
                              % ', '.join(sorted(experiments.keys())))
    if name not in experiments:
        raise ExperimentError('unknown experiment %r; known: %s (add it to serving_experiments)'
                              % (name, ', '.join(sorted(experiments.keys())) or 'none'))
    entry = experiments[name]
    if known_variables is not None:
        check_variables(name, entry['vars'], known_variables)
    topology = topology or {}
    blocked_by = []
    for fact in entry.get('requires') or []:
        if fact not in topology:
            blocked_by.append('%s is unknown (the nccl_topology facts do not have it)' % fact)
        elif topology[fact] is not True:
            blocked_by.append('%s is %s' % (fact, 'unknown' if topology[fact] is None else
                                            ('%s' % topology[fact]).lower()))
    overlay = {}
    restore = {}
    for key in entry['vars'].keys():
        if defaults is not None:
            restore[key] = _baseline_value(name, key, current, defaults)
        value = entry['vars'][key]
        base = None
        if current is not None:
            try:
                base = current[key] if key in current else None
            except Exception:  # an inventory value that does not template is no base to merge into
                base = None
        overlay[key] = merge(base, value) if _is_mapping(value) else value
    return {
        'name': name,
        'description': entry.get('description') or '',
        'requires': list(entry.get('requires') or []),
        'overlay': overlay,
        'blocked_by': blocked_by,
        'reasons': list(topology.get('reasons') or []) if blocked_by else [],
        'refused': bool(blocked_by) and not force,
        'forced': bool(blocked_by) and bool(force),
        'restore': restore,
    }


def refusal_message(planned, node):
    lines = ['experiment %s is ruled out by the GPU topology of %s: %s.'
             % (planned['name'], node, '; '.join(planned['blocked_by']))]
    lines.extend('  - %s' % reason for reason in planned['reasons'])
    lines.append('The server was not touched. To run it anyway (the benchmark gate still rolls back a '
                 'regression): -e serving_experiment_force=true')
    return '\n'.join(lines)


def _fmt_throughput(value):
    return 'n/a' if value is None else '{0:,.1f} tok/s'.format(value)


def decide(baseline, candidate, max_regression, healthy, error=None):
    """Keep or roll back an experiment.

    ``baseline`` and ``candidate`` are benchmark results (dicts with
    ``output_throughput``; candidate may be None when the server never got
    healthy). ``max_regression`` is the tolerated fractional drop (0.1 = 10%).
    ``error`` is what stopped the experiment's converge (failed task and message): when the
    experiment never got to run, that cause is the message and comes first.
    Returns a dict with ``action`` (keep|rollback), ``change_pct`` and a
    ``message`` that names both numbers.
    """
    if max_regression is None or not 0 <= float(max_regression) < 1:
        raise ExperimentError('max_regression is a fraction in [0, 1), e.g. 0.1 for 10%%, got %r'
                              % (max_regression,))
    max_regression = float(max_regression)
    base_tp = (baseline or {}).get('output_throughput')
    if not base_tp:
        raise ExperimentError('the baseline benchmark has no output_throughput to compare against')
    cand_tp = (candidate or {}).get('output_throughput')
    change = None if cand_tp is None else (cand_tp - base_tp) / base_tp
    change_pct = None if change is None else round(change * 100.0, 1)
    numbers = 'baseline %s, experiment %s' % (_fmt_throughput(base_tp), _fmt_throughput(cand_tp))
    power = ''
    base_w = ((baseline or {}).get('gpu') or {}).get('mean_power_w')
    cand_w = ((candidate or {}).get('gpu') or {}).get('mean_power_w')
    if base_w is not None and cand_w is not None:
        power = '; mean GPU power %.0f W -> %.0f W' % (base_w, cand_w)
    if error:
        return {'action': 'rollback', 'change_pct': change_pct, 'reason': 'failed',
                'message': '%s (%s)%s' % (error.strip(), numbers, power)}
    if not healthy:
        return {'action': 'rollback', 'change_pct': change_pct, 'reason': 'unhealthy',
                'message': 'server did not become healthy with the experiment (%s)%s' % (numbers, power)}
    if cand_tp is None or (candidate or {}).get('completed', 1) == 0:
        return {'action': 'rollback', 'change_pct': change_pct, 'reason': 'no_result',
                'message': 'experiment benchmark completed no request (%s)%s' % (numbers, power)}
    if change < -max_regression:
        return {'action': 'rollback', 'change_pct': change_pct, 'reason': 'regression',
                'message': 'throughput regressed %.1f%%, more than the allowed %.0f%% (%s)%s'
                           % (change * 100.0, max_regression * 100.0, numbers, power)}
    return {'action': 'keep', 'change_pct': change_pct, 'reason': 'within_tolerance',
            'message': 'throughput %+.1f%% (%s)%s' % (change * 100.0, numbers, power)}


def role_options(specs):
    """Every option the roles document, name -> documented default (None when it has none).

    ``specs`` are parsed ``meta/argument_specs.yml`` files; every entry point counts.
    """
    options = {}
    for spec in specs:
        for entry in ((spec or {}).get('argument_specs') or {}).values():
            for name, option in ((entry or {}).get('options') or {}).items():
                options.setdefault(name, (option or {}).get('default'))
    return options
