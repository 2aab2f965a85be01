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
        inconclusive: keep                       # optional: what stays when the change is within the noise

The baseline is the inventory without any overlay. The overlay never goes to a file: the
serving role lays it over the inventory as facts and, on rollback, sets the same variables
back to the values ``plan`` recorded before the experiment (``restore``).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import difflib
import json
import math
import re

from ansible_collections.inferops.serving.plugins.module_utils._serving_benchmark import OBJECTIVES
from ansible_collections.inferops.serving.plugins.module_utils._statistics import t95

# ``inconclusive``: what an experiment says stays when the gate finds its change within the noise
# (serving_gate_inconclusive otherwise; one of INCONCLUSIVE_ACTIONS): an upgrade that is neither
# slower nor answers differently is worth keeping, a tuning knob is not.
ENTRY_KEYS = ('description', 'requires', 'vars', 'inconclusive')
_VAR_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


class ExperimentError(Exception):
    """An experiment that does not exist or is not well defined."""


def is_mapping(value):
    return hasattr(value, 'keys') and hasattr(value, '__getitem__')


def entry_problem(entry, where, allowed):
    """Why an inventory entry (experiment, campaign) is not a mapping of only ``allowed`` keys, or None."""
    if not is_mapping(entry):
        return '%s must be a mapping with %s' % (where, ', '.join(allowed))
    unknown = sorted('%s' % k for k in entry.keys() if k not in allowed)
    if unknown:
        return '%s has unknown keys %s; allowed: %s' % (where, ', '.join(unknown), ', '.join(allowed))
    return None


def merge(base, overlay):
    """Overlay ``overlay`` on ``base``: mappings merge key by key, anything else replaces."""
    if not (is_mapping(base) and is_mapping(overlay)):
        return overlay
    result = dict((k, base[k]) for k in base.keys())
    for key in overlay.keys():
        result[key] = merge(result[key], overlay[key]) if key in result else overlay[key]
    return result


def validate(experiments):
    """Check every entry so that a typo fails before anything on a node changes."""
    if not is_mapping(experiments):
        raise ExperimentError('serving_experiments must be a mapping of name to experiment, got %s'
                              % type(experiments).__name__)
    for name in experiments.keys():
        entry = experiments[name]
        where = 'serving_experiments.%s' % name
        problem = entry_problem(entry, where, ENTRY_KEYS)
        if problem:
            raise ExperimentError(problem)
        overlay = entry.get('vars')
        if not is_mapping(overlay) or not overlay:
            raise ExperimentError('%s.vars must map role variables to the values the experiment uses' % where)
        bad = sorted(k for k in overlay.keys() if not _VAR_NAME.match('%s' % k))
        if bad:
            raise ExperimentError('%s.vars has keys that are not variable names: %s' % (where, ', '.join(bad)))
        requires = entry.get('requires') or []
        if isinstance(requires, (str, bytes)) or not all(isinstance(r, str) for r in requires):
            raise ExperimentError('%s.requires must be a list of nccl_topology fact names' % where)
        if entry.get('inconclusive') is not None and entry.get('inconclusive') not in INCONCLUSIVE_ACTIONS:
            raise ExperimentError('%s.inconclusive must be %s, got %r'
                                  % (where, ' or '.join(INCONCLUSIVE_ACTIONS), entry.get('inconclusive')))


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
        overlay[key] = merge(base, value) if is_mapping(value) else value
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
        # None: serving_gate_inconclusive decides.
        'inconclusive': entry.get('inconclusive'),
    }


def refusal_message(planned, node):
    lines = ['experiment %s is ruled out by the GPU topology of %s: %s.'
             % (planned['name'], node, '; '.join(planned['blocked_by']))]
    lines.extend('  - %s' % reason for reason in planned['reasons'])
    lines.append('The server was not touched. To run it anyway (the benchmark gate still rolls back a '
                 'regression): -e serving_experiment_force=true')
    return '\n'.join(lines)


UNITS = {'output_throughput': 'tok/s', 'tokens_per_joule': 'tok/J'}
LABELS = {'output_throughput': 'throughput', 'tokens_per_joule': 'tokens per joule'}
INCONCLUSIVE_ACTIONS = ('rollback', 'keep')


def _fmt_throughput(value):
    return 'n/a' if value is None else '{0:,.1f} tok/s'.format(value)


def _fmt(value, objective):
    if value is None:
        return 'n/a'
    if objective == 'tokens_per_joule':
        return '{0:.3f} tok/J'.format(value)
    return _fmt_throughput(value)


def _samples(result, objective):
    """(mean, stdev or None, n) of ``objective`` in a benchmark result, old single-run records included."""
    result = result or {}
    spread = (result.get('spread') or {}).get(objective) or {}
    mean = spread.get('mean') if spread.get('mean') is not None else result.get(objective)
    return mean, spread.get('stdev'), int(spread.get('n') or (1 if mean is not None else 0))


def _fmt_spread(result, objective):
    mean, stdev, count = _samples(result, objective)
    if mean is None:
        return 'n/a'
    if stdev is None:
        return '%s (1 run)' % _fmt(mean, objective)
    spread = (result.get('spread') or {}).get(objective) or {}

    def bare(value):
        return _fmt(value, objective).split(' ')[0]
    low, high = bare(spread.get('min')), bare(spread.get('max'))
    return '%s +/- %s (%d runs, %s..%s)' % (_fmt(mean, objective), bare(stdev), count, low, high)


def noise(baseline, candidate, objective='output_throughput'):
    """Relative 95% confidence half-width of the difference of the two means (Welch), or None.

    A side measured once borrows the other side's standard deviation: the same server on the
    same host drifts by about as much. Two single runs have no measured noise.
    """
    base_mean, base_sd, base_n = _samples(baseline, objective)
    cand_mean, cand_sd, cand_n = _samples(candidate, objective)
    if not base_mean or cand_mean is None:
        return None
    if base_sd is None and cand_sd is None:
        return None
    base_sd = cand_sd if base_sd is None else base_sd
    cand_sd = base_sd if cand_sd is None else cand_sd
    base_var = base_sd ** 2 / base_n
    cand_var = cand_sd ** 2 / cand_n
    total = base_var + cand_var
    if total == 0:
        return 0.0
    # Welch-Satterthwaite degrees of freedom; a single run contributes none of its own.
    denominator = ((base_var ** 2 / (base_n - 1)) if base_n > 1 else 0) + \
        ((cand_var ** 2 / (cand_n - 1)) if cand_n > 1 else 0)
    degrees = total ** 2 / denominator if denominator else 1
    return t95(max(degrees, 1)) * math.sqrt(total) / base_mean


def decide(baseline, candidate, max_regression, healthy, error=None, objective='output_throughput',
           min_effect=0.02, inconclusive='rollback', lock=None):
    """Keep, roll back, or call an experiment inconclusive.

    ``baseline`` and ``candidate`` are benchmark results (``output_throughput``,
    ``tokens_per_joule`` and, from repeated runs, ``spread``); candidate may be None when
    the server never got healthy. ``error`` is what stopped the experiment's converge
    (failed task and message): when the experiment never got to run, that cause is the
    message and comes first. ``lock`` is the correctness lock's comparison
    (``_correctness.compare``): changed answers roll back whatever the speed.

    With a measured spread (two or more runs on either side) a change is real when it is
    larger than the 95% confidence half-width of the difference and than ``min_effect``:
    a real gain is kept, a real loss rolled back, anything else is inconclusive and
    ``inconclusive`` says what happens (``rollback``: keep the baseline). Without a spread
    the old rule holds: a drop beyond ``max_regression`` rolls back, anything else is kept.
    Returns ``action`` (keep|rollback), ``verdict`` (kept|rolled_back|inconclusive),
    ``reason``, ``change_pct``, ``noise_pct`` and a ``message`` that names both figures.
    """
    if max_regression is None or not 0 <= float(max_regression) < 1:
        raise ExperimentError('max_regression is a fraction in [0, 1), e.g. 0.1 for 10%%, got %r'
                              % (max_regression,))
    if objective not in OBJECTIVES:
        raise ExperimentError('the gate objective is one of %s, got %r' % (', '.join(OBJECTIVES), objective))
    if min_effect is None or not 0 <= float(min_effect) < 1:
        raise ExperimentError('min_effect is a fraction in [0, 1), e.g. 0.02 for 2%%, got %r' % (min_effect,))
    if inconclusive not in INCONCLUSIVE_ACTIONS:
        raise ExperimentError('what an inconclusive experiment does is one of %s, got %r'
                              % (', '.join(INCONCLUSIVE_ACTIONS), inconclusive))
    max_regression = float(max_regression)
    min_effect = float(min_effect)
    base_value = _samples(baseline, objective)[0]
    if not base_value:
        raise ExperimentError('the baseline benchmark has no %s to compare against%s'
                              % (objective, ' (no GPU power readings)' if objective == 'tokens_per_joule' else ''))
    cand_value = _samples(candidate, objective)[0]
    change = None if cand_value is None else (cand_value - base_value) / base_value
    change_pct = None if change is None else round(change * 100.0, 1)
    margin = noise(baseline, candidate, objective) if cand_value is not None else None
    noise_pct = None if margin is None else round(margin * 100.0, 1)
    numbers = 'baseline %s, experiment %s' % (_fmt_spread(baseline, objective), _fmt_spread(candidate, objective))
    extra = ''
    base_w = ((baseline or {}).get('gpu') or {}).get('mean_power_w')
    cand_w = ((candidate or {}).get('gpu') or {}).get('mean_power_w')
    if base_w is not None and cand_w is not None:
        extra = '; mean GPU power %.0f W -> %.0f W' % (base_w, cand_w)
    base_tpj = (baseline or {}).get('tokens_per_joule')
    cand_tpj = (candidate or {}).get('tokens_per_joule')
    if objective != 'tokens_per_joule' and base_tpj and cand_tpj:
        extra += ', %.3f -> %.3f tok/J' % (base_tpj, cand_tpj)
    base = {'change_pct': change_pct, 'noise_pct': noise_pct, 'objective': objective}

    def verdict(action, reason, message, name=None):
        result = dict(base, action=action, reason=reason, message=message)
        result['verdict'] = name or ('kept' if action == 'keep' else 'rolled_back')
        return result

    if error:
        return verdict('rollback', 'failed', '%s (%s)%s' % (error.strip(), numbers, extra))
    if not healthy:
        return verdict('rollback', 'unhealthy', 'server did not become healthy with the experiment (%s)%s'
                       % (numbers, extra))
    if cand_value is None or (candidate or {}).get('completed', 1) == 0:
        return verdict('rollback', 'no_result', 'experiment benchmark completed no request (%s)%s' % (numbers, extra))
    if lock is not None and not lock.get('ok', True):
        return verdict('rollback', 'answers_changed', '%s; %s %+.1f%% (%s)%s'
                       % (lock.get('message'), LABELS[objective], change * 100.0, numbers, extra))
    label = LABELS[objective]
    if margin is None:
        if change < -max_regression:
            return verdict('rollback', 'regression', '%s regressed %.1f%%, more than the allowed %.0f%% (%s)%s'
                           % (label, change * 100.0, max_regression * 100.0, numbers, extra))
        return verdict('keep', 'within_tolerance', '%s %+.1f%% (%s)%s' % (label, change * 100.0, numbers, extra))
    threshold = max(margin, min_effect)
    if abs(change) <= threshold:
        action = 'keep' if inconclusive == 'keep' else 'rollback'
        return verdict(action, 'inconclusive',
                       'inconclusive: %s %+.1f%% is within the measured noise (+/- %.1f%%, at least %.0f%%); %s (%s)%s'
                       % (label, change * 100.0, threshold * 100.0, min_effect * 100.0,
                          'the experiment stays (serving_gate_inconclusive=keep)' if action == 'keep'
                          else 'the baseline stays', numbers, extra), name='inconclusive')
    if change > 0:
        return verdict('keep', 'improved', '%s %+.1f%%, beyond the measured noise of +/- %.1f%% (%s)%s'
                       % (label, change * 100.0, threshold * 100.0, numbers, extra))
    return verdict('rollback', 'regression', '%s regressed %.1f%%, beyond the measured noise of +/- %.1f%% (%s)%s'
                   % (label, change * 100.0, threshold * 100.0, numbers, extra))


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


# Host-side experiments (serving_host_experiments) lay these per-VM variables of the role
# inferops.serving.proxmox_gpu_vm over the VM's inventory; the baseline is the inventory.
HOST_ENTRY_KEYS = ('description', 'vars')
HOST_OVERLAY_VARIABLES = ('proxmox_gpu_vm_clique', 'proxmox_gpu_vm_numa', 'proxmox_gpu_vm_hugepages')


def host_plan(experiments, name):
    """The host experiment ``name`` checked: ``name``, ``description`` and ``vars`` (its overlay).

    Raises ExperimentError, naming the variable to change, for an unknown name, an entry with
    other keys, or an overlay of anything but the VM's passthrough settings.
    """
    if not is_mapping(experiments):
        raise ExperimentError('serving_host_experiments must be a mapping of name to experiment, got %s'
                              % type(experiments).__name__)
    if name not in experiments:
        raise ExperimentError('serving_host_experiment must be one of %s (got %r)'
                              % (', '.join(sorted('%s' % k for k in experiments.keys())) or 'none', name))
    where = 'serving_host_experiments.%s' % name
    entry = experiments[name]
    problem = entry_problem(entry, where, HOST_ENTRY_KEYS)
    if problem:
        raise ExperimentError(problem)
    overlay = entry.get('vars')
    if not is_mapping(overlay) or not overlay:
        raise ExperimentError('%s.vars must map variables of the VM (%s) to the values the experiment uses'
                              % (where, ', '.join(HOST_OVERLAY_VARIABLES)))
    unknown = sorted('%s' % k for k in overlay.keys() if k not in HOST_OVERLAY_VARIABLES)
    if unknown:
        raise ExperimentError('%s.vars.%s is not a per-VM variable of inferops.serving.proxmox_gpu_vm; allowed: %s'
                              % (where, unknown[0], ', '.join(HOST_OVERLAY_VARIABLES)))
    return {'name': name, 'description': entry.get('description') or '',
            'vars': dict((k, overlay[k]) for k in overlay.keys())}


def _json_matrix(matrix):
    return json.dumps(matrix)


def host_decide(check, topology, evidence=None, error=None):
    """Keep a host-side GPU experiment, or roll it back, from what the guest sees after it.

    ``check`` is the ``nccl_allreduce_check`` fact after the change (``ok``, ``failure``,
    ``p2p_all_pairs``, ``p2p_access``), ``topology`` the ``nccl_topology`` fact after it
    (``all_pairs_p2p``, ``p2p_read``), ``evidence`` the check's evidence lines. ``error`` is
    the step that failed on the way (task and message): it is the reason and comes first.
    Kept only when every sum is right and both the driver's matrix and the check's own say
    P2P on every pair. Returns ``keep``, ``reason`` and ``evidence`` (the check's lines and
    the driver's P2P read matrix).
    """
    lines = list(evidence or [])
    if error:
        return {'keep': False, 'reason': error.strip(), 'evidence': lines}
    check = check or {}
    topology = topology or {}
    lines.append('driver P2P read matrix: %s' % _json_matrix(topology.get('p2p_read')))
    if check.get('ok') and check.get('p2p_all_pairs') is True and topology.get('all_pairs_p2p') is True:
        return {'keep': True, 'reason': 'every sum right and P2P on every pair', 'evidence': lines}
    failure = check.get('failure') or {}
    if not check.get('ok') and failure.get('msg'):
        return {'keep': False, 'reason': failure['msg'], 'evidence': lines}
    return {'keep': False, 'evidence': lines,
            'reason': 'P2P is not present on every pair (driver: %s, check: %s)'
                      % (_json_matrix(topology.get('p2p_read')), _json_matrix(check.get('p2p_access')))}


def host_report(planned, verdict, node, vmid, vm_host, topology_before=None, topology_now=None):
    """What a host experiment's run says once it is decided: a rollback's reason and evidence, or
    what a kept one changed (the evidence, the SGLang flags and NCCL environment the topology calls
    for now) and that the inventory still holds the baseline."""
    if not verdict.get('keep'):
        return ['Rolled back %s on VM %s: %s' % (planned['name'], vmid, verdict['reason'])] + list(verdict.get('evidence') or [])
    before, now = topology_before or {}, topology_now or {}
    return (['Kept %s on VM %s (%s): %s.' % (planned['name'], vmid, vm_host, verdict['reason'])]
            + list(verdict.get('evidence') or [])
            + ['SGLang flags the topology now calls for: %s (before: %s); NCCL environment: %s.'
               % (now.get('recommended_sglang_args'), before.get('recommended_sglang_args'), now.get('recommended_env')),
               'The inventory still holds the baseline: set %s on %s to keep it, or a run of the proxmox_gpu_vm role reverts it.'
               % (json.dumps(planned['vars']), node)])


def host_check_runtime(python='', installation=None, latest_deploy=None, service_user='', service_group=''):
    """Who runs a host experiment's all-reduce check and owns the history it writes: ``python`` when
    given (serving_host_experiment_python), else the venv the sglang role published in this play
    (``installation``), else the server's Python that the node's latest deploy recorded
    (``latest_deploy``); empty when there is none. The owner and group are the installation's
    service user and group, else ``service_user`` and ``service_group`` (the role variables)."""
    installation = installation or {}
    if python:
        chosen = python
    elif installation.get('venv_path'):
        chosen = installation['venv_path'] + '/bin/python'
    else:
        chosen = ((latest_deploy or {}).get('server') or {}).get('python') or ''
    return {'python': chosen,
            'owner': installation.get('service_user') or ('' if installation else service_user or ''),
            'group': installation.get('service_group') or ('' if installation else service_group or '')}
