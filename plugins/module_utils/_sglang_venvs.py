# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Side-by-side venvs, one per resolved SGLang release set.

Every release set (with any single-version pins laid over it) installs into a venv of its own
under one folder, named after the set and a digest of exactly what is pinned in it. Installing
another set therefore never touches the venv the server runs from, and switching back to a set
that is still installed is a restart, not a reinstall. Old venvs are pruned by count: the ones
that served most recently (the node's history says which, every deploy record naming its venv)
stay, the one that serves now always.

Each venv's compiled kernels (SGLANG_CACHE_DIR and the JIT caches the sglang role points into it)
live in a folder of the same name under a second folder: they belong to exactly that venv's
packages, survive its restarts and rollbacks, and go when the venv goes.

Pure functions: the module inferops.serving.sglang_venvs reads the folder and acts on their answer.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json
import re

VENV_NAME = re.compile(r'^[0-9A-Za-z][0-9A-Za-z.+_-]*$')


class VenvError(ValueError):
    """Inputs that name no venv of the folder, or a count that is none."""


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


def venv_names(paths, folder):
    """The venv names of ``paths`` (the venvs the node's history says served) that lie in ``folder``;
    others (a venv of an earlier layout, another folder) are no venvs of it and are left out."""
    folder = folder.rstrip('/')
    names = []
    for path in paths or []:
        path = str(path or '').rstrip('/')
        parent, _slash, name = path.rpartition('/')
        if parent == folder and VENV_NAME.match(name):
            names.append(name)
    return names


def prune_plan(venvs, served, keep, protected=()):
    """(kept, removed): venv names to keep and to remove, each list newest first.

    ``venvs``: name -> installed epoch (seconds) of every venv in the folder. The venvs that
    served most recently (``served``: the names in the order they served, oldest first, repeats
    allowed) are kept first, then the newest installed; ``protected`` names (the one serving now)
    are kept whatever ``keep`` says.
    """
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise VenvError('keep must be a whole number of venvs, 1 or more, got %r' % (keep,))
    unknown = [name for name in protected if name not in venvs]
    if unknown:
        raise VenvError('%s is not a venv of the folder (it has %s)'
                        % (', '.join(unknown), ', '.join(sorted(venvs)) or 'none'))
    recent = []
    for name in reversed(list(served)):
        if name in venvs and name not in recent:
            recent.append(name)
    served = recent
    never_served = sorted((name for name in venvs if name not in served), key=lambda name: (-venvs[name], name))
    order = list(protected) + [name for name in served + never_served if name not in protected]
    kept = []
    for name in order:
        if name not in kept and (name in protected or len(kept) < keep):
            kept.append(name)
    removed = [name for name in order if name not in kept]
    return kept, removed


def stale_caches(caches, kept):
    """The kernel cache folders to remove, sorted: every one whose venv does not stay (``kept``),
    which takes the caches of the venvs pruned now and of venvs gone otherwise (removed by hand,
    or by a run that stopped between a venv and its cache).

    ``caches``: the folder names in the kernel cache folder. A name that cannot be a venv's
    (a dot file, the removal prefix) is none of these folders and stays.
    """
    kept = set(kept)
    return sorted(str(name) for name in caches or [] if VENV_NAME.match(str(name)) and name not in kept)
