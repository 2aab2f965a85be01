# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The closing words of a run that refused, stopped or rolled back a change on a node.

Each function returns the four parts the serving role's closing step says (``what``, ``reason``,
``change``, ``serving``), or None when the run has nothing to close.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re


def experiment(name, node, unit, planned=None, decision=None, failure=None):
    """An experiment that was refused, stopped (``failure``: the failed task's ``task`` and ``msg``)
    or rolled back (``decision`` with verdict ``rolled_back``); None when it was kept or inconclusive."""
    if failure is None and (decision or {}).get('verdict') != 'rolled_back':
        return None
    if failure is None:
        return {
            'what': 'Experiment %s rolled back' % name,
            'reason': decision['message'],
            'change': ("nothing on the node (the inventory is still its baseline); to try it again, change the "
                       "experiment's variables (%s)" % ', '.join((planned or {}).get('restore') or {})),
            'serving': 'The baseline is running and healthy again: the node serves as before.',
        }
    if (planned or {}).get('refused'):
        return {
            'what': 'Experiment %s refused' % name,
            'reason': failure['msg'],
            'change': ('run it on a node whose topology suits it, or anyway with -e serving_experiment_force=true '
                       '(the benchmark gate still rolls back a regression)'),
            'serving': 'The node serves as before: the experiment was refused before anything changed.',
        }
    return {
        'what': 'Experiment %s stopped' % name,
        'reason': '%s: %s' % (failure['task'], failure['msg']),
        'change': 'what the message says, then run the experiment again',
        'serving': ('This run could not verify that the node serves as before: check it (journalctl -u %s), and '
                    'run deploy.yml -l %s to put the baseline back.' % (unit, node)),
    }


def _unit_property(show, name):
    """A property of ``systemctl show --property=...`` output; None when absent."""
    match = re.search(r'^%s=(.*)$' % re.escape(name), show or '', re.MULTILINE)
    return None if match is None else match.group(1)


def deploy(failure, release_set, unit, before=None, after='', out_of_router=False):
    """A deploy that failed (``failure``: ``task``, ``msg``, ``arguments_refused``). ``before`` and
    ``after`` are ``systemctl show`` of the server's unit (ActiveState, MainPID, ExecStart) right after
    the node lock was taken (None: the deploy stopped before) and after the failure; ``out_of_router``:
    the node left a router it stays out of."""
    refused = bool(failure.get('arguments_refused'))
    if before is None:
        serving = 'Nothing was changed on the node.'
    else:
        active = _unit_property(after, 'ActiveState') == 'active'
        if active and before == after:
            serving = ('The node serves as before: %s still runs the same process (PID %s) on the same command line.'
                       % (unit, _unit_property(after, 'MainPID')))
        elif not active and _unit_property(before, 'ActiveState') != 'active':
            serving = 'The node served nothing before this deploy, and serves nothing now.'
        else:
            serving = ('The node does not serve as before: %s %s; see the error above and the journal (journalctl -u %s).'
                       % (unit, 'was restarted or changed' if active else 'is not running', unit))
    if out_of_router:
        serving += ' It stays out of the router until a deploy of it succeeds.'
    return {
        'what': '%s (release set %s)' % ('Deploy refused' if refused else 'Deploy stopped', release_set),
        'reason': '%s%s' % ('' if refused or not failure.get('task') else '%s: ' % failure['task'], failure['msg']),
        'change': '%s, then run deploy.yml again' % (
            'change or remove these server arguments in sglang_server_args or sglang_server_extra_args, or deploy a'
            ' release set whose SGLang accepts them (sglang_release_set)' if refused else 'what the message says'),
        'serving': serving,
    }
