# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Experiments are data: a name, what the topology must allow, and an overlay of role variables.

    sglang_experiments:
      sm120_allreduce_fusion:
        description: FlashInfer allreduce fusion on SM120 (patched)
        requires: [allreduce_fusion_advised]     # nccl_topology facts that must be true
        vars:                                    # role variables laid over the inventory
          sglang_sm120_allreduce_fusion_patch: true
          sglang_server_extra_args:
            enable-flashinfer-allreduce-fusion: true

The baseline is the inventory without any overlay.
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
        raise ExperimentError('sglang_experiments must be a mapping of name to experiment, got %s'
                              % type(experiments).__name__)
    for name in experiments.keys():
        entry = experiments[name]
        where = 'sglang_experiments.%s' % name
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
        raise ExperimentError('sglang_experiments.%s.vars.%s is not a variable of the roles%s'
                              % (name, key, '; did you mean %s?' % close[0] if close else ''))


def plan(experiments, name, topology, force=False, current=None, known_variables=None):
    """What running experiment ``name`` means on a node with these ``topology`` facts.

    ``current`` gives the node's baseline values of the overlaid variables, so that a
    mapping in the overlay (server arguments) adds to the inventory's instead of
    replacing it. ``known_variables`` (the roles' documented variables), when given,
    catches misspelt overlay keys. Returns a dict with ``overlay``, ``blocked_by`` (requirements the
    topology does not meet, in words), ``reasons`` (the topology's own explanation),
    ``refused`` and ``forced``.
    """
    validate(experiments)
    if not name:
        raise ExperimentError('say which experiment to run: -e experiment=<name>; known: %s'
                              % ', '.join(sorted(experiments.keys())))
    if name not in experiments:
        raise ExperimentError('unknown experiment %r; known: %s (add it to sglang_experiments)'
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
    for key in entry['vars'].keys():
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
    }


def refusal_message(planned, node):
    lines = ['experiment %s is ruled out by the GPU topology of %s: %s.'
             % (planned['name'], node, '; '.join(planned['blocked_by']))]
    lines.extend('  - %s' % reason for reason in planned['reasons'])
    lines.append('The server was not touched. To run it anyway (the benchmark gate still rolls back a '
                 'regression): -e force=true')
    return '\n'.join(lines)
