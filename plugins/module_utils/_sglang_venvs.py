# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Side-by-side venvs, one per resolved SGLang release set.

Every release set (with any single-version pins laid over it) installs into a venv of its own
under one folder, named after the set and a digest of exactly what is pinned in it. Installing
another set therefore never touches the venv the server runs from, and switching back to a set
that is still installed is a restart, not a reinstall. Old venvs are pruned by count: the ones
that served most recently stay, the one that serves now always.

Pure functions: the module inferops.serving.sglang_venvs reads the folder and acts on their answer.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json
import re

# The activation history kept in the venvs folder: venv names, the one that served most recently last.
ACTIVATIONS_FILE = 'activations.json'
# Names the history keeps: enough to order any sensible sglang_venvs_keep.
MAX_ACTIVATIONS = 50
VENV_NAME = re.compile(r'^[0-9A-Za-z][0-9A-Za-z.+_-]*$')


class VenvError(ValueError):
    """Inputs that name no venv of the folder, or a history that is not one."""


def venv_name(release_name, versions, packages, install_dependencies):
    """'0.5.23-1a2b3c4d': the set's name and the first 8 hex digits of the sha256 of what the venv
    holds (every pin, the packages installed, whether with their dependencies). Two inputs that
    would install anything different get different venvs."""
    if not release_name or not VENV_NAME.match(str(release_name)):
        raise VenvError('release set name %r cannot name a venv' % (release_name,))
    content = {
        'versions': dict((str(k), str(v)) for k, v in (versions or {}).items()),
        'packages': sorted(str(p) for p in (packages or [])),
        'dependencies': bool(install_dependencies),
    }
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(',', ':')).encode('utf-8')).hexdigest()
    return '%s-%s' % (release_name, digest[:8])


def parse_activations(text):
    """The venv names of the activation history, oldest first; [] for no file."""
    if text is None or not text.strip():
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise VenvError('the activation history is not JSON: %s' % exc)
    names = data.get('activations') if isinstance(data, dict) else None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise VenvError('the activation history has no list of venv names under "activations"')
    return names


def activated(history, name):
    """The history once ``name`` serves: appended unless it is already the latest entry, one
    entry per name, at most MAX_ACTIVATIONS."""
    if history and history[-1] == name:
        return list(history)
    names = [entry for entry in history if entry != name] + [name]
    return names[-MAX_ACTIVATIONS:]


def activations_text(history):
    return json.dumps({'activations': list(history)}, indent=2) + '\n'


def prune_plan(venvs, history, keep, protected=()):
    """(kept, removed): venv names to keep and to remove, each list newest first.

    ``venvs``: name -> installed epoch (seconds) of every venv in the folder. The venvs that
    served most recently (``history``, oldest first) are kept first, then the newest installed;
    ``protected`` names (the one serving now, the one about to) are kept whatever ``keep`` says.
    """
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise VenvError('keep must be a whole number of venvs, 1 or more, got %r' % (keep,))
    unknown = [name for name in protected if name not in venvs]
    if unknown:
        raise VenvError('%s is not a venv of the folder (it has %s)'
                        % (', '.join(unknown), ', '.join(sorted(venvs)) or 'none'))
    served = [name for name in reversed(history) if name in venvs]
    never_served = sorted((name for name in venvs if name not in served), key=lambda name: (-venvs[name], name))
    order = [name for name in protected] + [name for name in served + never_served if name not in protected]
    kept = []
    for name in order:
        if name not in kept and (name in protected or len(kept) < keep):
            kept.append(name)
    removed = [name for name in order if name not in kept]
    return kept, removed
