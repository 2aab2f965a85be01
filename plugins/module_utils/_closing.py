# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The closing words of a run that refused, stopped or rolled back a change on a node.

Each run's function returns the parts the serving role's closing step says (``what``, ``reason``,
``change``, and ``serving`` where the run knows it in words; otherwise the step reads what the node
serves, with serving_now), or None when the run has nothing to close; ``message`` says them as one line.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re


# Said after what the node serves, when a failed run took it out of a router it stays out of.
STAYS_OUT_OF_ROUTER = 'It stays out of the router until a deploy of it succeeds.'


def stopped_by(result, task=None, fallback='the run failed'):
    """What a rescue keeps of the task that stopped a run: its name (``task``), its message as text
    (``fallback`` when it has none), and whether the installed SGLang refused the server arguments
    (the result lists ``errors``). Nothing else: a failed task's whole result may hold the server's
    command line and its secrets."""
    result = result or {}
    message = result.get('msg')
    return {
        'task': str((task or {}).get('name') or ''),
        'msg': fallback if message is None or message == '' else str(message),
        'arguments_refused': result.get('errors') is not None,
    }


def _stopped_reason(failure):
    """A stop's reason: the failed task's name, then its message (the message alone without a name)."""
    return '%s: %s' % (failure['task'], failure['msg']) if failure.get('task') else failure['msg']


def experiment(name, node, unit, planned=None, decision=None, failure=None, out_of_router=False):
    """An experiment that was refused, stopped (``failure``: the failed task's ``task`` and ``msg``)
    or rolled back (``decision`` with verdict ``rolled_back``); None when it was kept or inconclusive.
    ``out_of_router``: a stopped experiment had taken the node out of a router it stays out of."""
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
        'reason': _stopped_reason(failure),
        'change': 'what the message says, then run the experiment again',
        'serving': ('This run could not verify that the node serves as before: check it (journalctl -u %s), and '
                    'run deploy.yml -l %s to put the baseline back.' % (unit, node)),
        'also': STAYS_OUT_OF_ROUTER if out_of_router else '',
    }


def hold_back(node, gate_message, routed=False, failure=None):
    """A node held back by the GPU health gate, whose ``gate_message`` says what it found, then
    "What to do: ..."; ``failure``: what stopped taking the node out of the router (the failed task's
    ``task`` and ``msg``; ``routed``: it is behind one). Its server is left as it runs; the rollout
    goes on with the other nodes."""
    failure = _stopped_reason(failure) if failure else ''
    if routed:
        where = '%s may still be in the router; ' % node if failure else '%s is out of the router; ' % node
    else:
        where = ''
    return {
        'what': 'Deploy held back (GPUs not fit to serve)',
        'reason': gate_message.split(' What to do:')[0] + (' Taking it out of the router failed: %s' % failure if failure else ''),
        'change': gate_message.split('What to do:')[-1].strip() if 'What to do:' in gate_message else 'what the GPU health gate says',
        'also': where + 'the other nodes are deployed without it.',
    }


def campaign(name, node, failure, locked=False, out_of_router=False):
    """A campaign that ``failure`` (``task``, ``msg``) refused, before the node lock (``locked`` false:
    nothing changed), or stopped under it (``out_of_router``: after it took the node out of a router,
    which it stays out of). What the node serves after a stop is read at the end."""
    if not locked:
        return {
            'what': 'Campaign %s refused' % name, 'reason': failure['msg'],
            'change': 'what the message says, then run the campaign again',
            'serving': 'Nothing was changed on the node; it serves as before.',
        }
    return {
        'what': 'Campaign %s stopped' % name,
        'reason': _stopped_reason(failure),
        'change': ('what the message says, then run the campaign again; deploy.yml -l %s puts back the baseline of the'
                   ' inventory' % node),
        'serving': '',
        'also': STAYS_OUT_OF_ROUTER if out_of_router else '',
    }


def host_experiment(name, vmid, vm_host, verdict=None, failure=None, locked=False, out_of_router=False):
    """A host experiment (a VM's passthrough on its Proxmox host) that was refused (``failure`` before
    the node lock: ``locked`` false), stopped (``failure`` under the lock) or rolled back (``verdict``
    without ``keep``); None when it was kept, or in check mode (no ``verdict``). ``restarted_by``
    informs the read of what the node serves at the end; ``out_of_router``: the node left a router
    it stays out of after a stop."""
    if failure is None and (verdict is None or verdict.get('keep', True)):
        return None
    rolled_back = failure is None
    refused = not rolled_back and not locked
    what = 'Host experiment %s %s (VM %s on %s)' % (
        name, 'rolled back' if rolled_back else 'refused' if refused else 'stopped', vmid, vm_host or 'its host')
    if rolled_back:
        return {
            'what': what, 'reason': verdict['reason'],
            'change': ("nothing: the host is back on the inventory's passthrough (the evidence above shows what the GPUs"
                       " did; try another experiment of serving_host_experiments, or other hardware)"),
            'serving': '', 'restarted_by': 'the restart of its VM', 'also': '',
        }
    if refused:
        return {
            'what': what, 'reason': failure['msg'],
            'change': 'what the message says, then run the experiment again',
            'serving': 'Nothing was changed on the node or its host; it serves as before.',
            'restarted_by': '', 'also': '',
        }
    return {
        'what': what,
        'reason': _stopped_reason(failure),
        'change': ("what the message says; playbooks/proxmox_gpu_vm.yml -e proxmox_gpu_vm_reboot=true puts the"
                   " inventory's passthrough back on the host and restarts the VM on it"),
        'serving': '', 'restarted_by': '',
        'also': STAYS_OUT_OF_ROUTER if out_of_router else '',
    }


def plan(node, reason=None, arguments_refused=False, failed_nodes=()):
    """A deploy's plan that failed on this node (``reason``; ``arguments_refused``: the installed SGLang
    refused the server arguments), or on ``failed_nodes`` when this one planned: every node plans before
    any changes, so nothing changed anywhere."""
    if reason is None:
        failed = ', '.join(failed_nodes)
        return {
            'what': 'Deploy stopped before anything changed',
            'reason': 'the plan failed on %s, and every node plans before any changes' % failed,
            'change': 'what the message of %s says' % failed,
            'serving': 'Nothing was changed on %s or any other node; each serves as it did before this run.' % node,
        }
    return {
        'what': 'Deploy refused before anything changed',
        'reason': reason,
        'change': '%s, then run deploy.yml again' % (
            'change or remove these server arguments in sglang_server_args or sglang_server_extra_args'
            if arguments_refused else 'the input the message names'),
        'serving': 'Nothing was changed on any node; each serves as it did before this run.',
    }


# Ansible's frame around a filter's refusal: the refusal alone is the reason.
_FILTER_FRAME = re.compile(r"Task failed: .*The filter plugin '[^']+' failed: ")
_FULL_STOP = re.compile(r'[.]\s*$')


def one_line(reason):
    """``reason`` on one line, without its full stop: a list of refused arguments ("a:\\n - why") becomes
    "a: why; b: why", and a filter's refusal loses the frame Ansible puts around it."""
    text = re.sub(r':\s*\n\s*-\s+', ': ', str(reason))
    text = re.sub(r'\s*\n\s*-\s+', '; ', text)
    text = re.sub(r'\s*\n\s*', ' ', text)
    return _FULL_STOP.sub('', _FILTER_FRAME.sub('', text))


def message(closing, node, unit, before=None, after=''):
    """The closing message of ``closing`` (one of the functions above) on ``node``: what, where, why,
    what to change, then what the node serves (``serving``, else serving_now of the reads of ``unit``
    before and after) and ``also``."""
    serving = closing.get('serving') or serving_now(unit, before, after or '', closing.get('restarted_by') or '')
    text = '%s on %s: %s. What to change: %s. %s' % (
        closing['what'], node, one_line(closing['reason']), _FULL_STOP.sub('', closing['change']), serving)
    return '%s %s' % (text, closing['also']) if closing.get('also') else text


def _unit_property(show, name):
    """A property of ``systemctl show --property=...`` output; None when absent."""
    match = re.search(r'^%s=(.*)$' % re.escape(name), show or '', re.MULTILINE)
    return None if match is None else match.group(1)


def _command_line(show):
    """The command line of ExecStart (its ``argv[]``), without the times systemd adds to it."""
    match = re.search(r'argv\[\]=[^;]*', show or '')
    return None if match is None else match.group(0)


def serving_now(unit, before=None, after='', restarted_by=''):
    """What the node serves at the end of a run that failed, from ``systemctl show`` of the server's
    unit (ActiveState, MainPID, ExecStart) read under the node lock before the run changed anything
    (``before``; None: the run stopped before it) and at its end (``after``). The same process on the
    same command line is a node that serves as before; so is the same command line started again by
    ``restarted_by`` (a restart that changes no file of the node, such as its VM's); nothing else is."""
    if before is None:
        return 'Nothing was changed on the node.'
    active = _unit_property(after, 'ActiveState') == 'active'
    pid = _unit_property(after, 'MainPID')
    if active and before == after:
        return 'The node serves as before: %s still runs the same process (PID %s) on the same command line.' % (unit, pid)
    if active and restarted_by and _command_line(before) == _command_line(after):
        return ('The node serves as before: %s runs the same command line again (PID %s), restarted by %s.'
                % (unit, pid, restarted_by))
    if not active and _unit_property(before, 'ActiveState') != 'active':
        return 'The node served nothing before this run, and serves nothing now.'
    return ('The node does not serve as before: %s %s; see the error above and the journal (journalctl -u %s).'
            % (unit, 'was restarted or changed' if active else 'is not running', unit))


def deploy(failure, release_set, out_of_router=False):
    """A deploy that failed (``failure``: ``task``, ``msg``, ``arguments_refused``); ``out_of_router``:
    the node left a router it stays out of. What the node serves is read at the end (serving_now);
    ``also`` says what follows it."""
    refused = bool(failure.get('arguments_refused'))
    return {
        'what': '%s (release set %s)' % ('Deploy refused' if refused else 'Deploy stopped', release_set),
        'reason': failure['msg'] if refused else _stopped_reason(failure),
        'change': '%s, then run deploy.yml again' % (
            'change or remove these server arguments in sglang_server_args or sglang_server_extra_args, or deploy a'
            ' release set whose SGLang accepts them (sglang_release_set)' if refused else 'what the message says'),
        'also': STAYS_OUT_OF_ROUTER if out_of_router else '',
    }
