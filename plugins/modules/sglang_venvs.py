#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_venvs
short_description: The side-by-side SGLang venvs of a node, the one serving noted, old ones pruned by count
version_added: 0.4.0
description:
  - Every SGLang release set has a venv of its own under O(path) (role C(inferops.serving.sglang)
    names them after the set and a digest of its pins). This module lists them and removes the
    venvs beyond O(keep).
  - The venvs that served most recently (O(served), from the node's history) stay first, then the
    newest installed; O(active) and O(protect) always stay. A venv is renamed before it is removed,
    so a run killed half way never leaves a partial venv under a name the role would take for
    installed.
  - A folder in O(path) without C(pyvenv.cfg) is not a venv and is left alone.
  - With O(caches_path), each venv's kernel cache folder there (of the venv's name) goes with its venv,
    and so does the cache folder of a venv that is gone otherwise.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  path:
    description: The folder that holds one venv per release set.
    type: path
    required: true
  active:
    description: Name of the venv the server runs now (a folder in O(path)).
    type: str
  served:
    description:
      - The venvs that served, oldest first, as paths (the C(venv) of each deploy record in the node's history);
        paths outside O(path) are ignored.
    type: list
    elements: str
    default: []
  protect:
    description: Names of other venvs never to remove in this run.
    type: list
    elements: str
    default: []
  keep:
    description: How many venvs stay, O(active) and O(protect) included; V(1) or more.
    type: int
    default: 2
  caches_path:
    description:
      - The folder that holds one kernel cache folder per venv, named as the venv (C(SGLANG_CACHE_DIR) and the
        JIT caches of role C(inferops.serving.sglang)). Omitted, no cache is touched.
    type: path
attributes:
  check_mode:
    description: Reports what it would note and remove.
    support: full
'''

EXAMPLES = r'''
- name: Keep the serving venv and the one that served before it
  inferops.serving.sglang_venvs:
    path: /opt/sglang/venvs
    active: 0.5.23-1a2b3c4d
    served: [/opt/sglang/venvs/0.5.9-c28a9298, /opt/sglang/venvs/0.5.23-1a2b3c4d]
    keep: 2
'''

RETURN = r'''
venvs:
  description: The venvs in O(path) before this run, by name.
  returned: always
  type: list
  elements: str
kept:
  description: The venvs that stay, most recently serving first.
  returned: always
  type: list
  elements: str
removed:
  description: The venvs removed (in check mode, that would be).
  returned: always
  type: list
  elements: str
'''

import errno
import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._sglang_venvs import (
    VenvError,
    prune_plan,
    stale_caches,
    venv_names,
)

# A venv being removed is first renamed to this prefix and a later run finishes the removal. Where
# the folder cannot be renamed, it holds this file instead while it is removed.
REMOVING_PREFIX = '.removing-'
REMOVING_MARK = '.inferops-removing'


def being_removed(folder, name):
    """Whether ``name`` in ``folder`` is what a removal (perhaps of a killed run) left."""
    return name.startswith(REMOVING_PREFIX) or os.path.exists(os.path.join(folder, name, REMOVING_MARK))


def folders(path):
    """The names of the folders in ``path`` (none being removed); none when it does not exist."""
    if not os.path.isdir(path):
        return []
    return sorted(name for name in os.listdir(path)
                  if os.path.isdir(os.path.join(path, name)) and not being_removed(path, name))


def installed_venvs(path):
    """name -> install time (mtime of pyvenv.cfg) of every venv in ``path``."""
    venvs = {}
    for name in sorted(os.listdir(path)) if os.path.isdir(path) else []:
        marker = os.path.join(path, name, 'pyvenv.cfg')
        if not name.startswith('.') and os.path.isfile(marker) and not being_removed(path, name):
            venvs[name] = os.stat(marker).st_mtime
    return venvs


def remove_folder(path, name):
    """Remove the folder ``name`` of ``path`` so that a run killed half way leaves no partial venv or
    cache that would be taken for whole: renamed first, or, where the file system refuses to rename
    it (overlayfs, for a folder of a container image's lower layer: EXDEV), marked first."""
    folder = os.path.join(path, name)
    doomed = os.path.join(path, REMOVING_PREFIX + name)
    try:
        os.rename(folder, doomed)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        with open(os.path.join(folder, REMOVING_MARK), 'w'):
            pass
        doomed = folder
    shutil.rmtree(doomed)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            active=dict(type='str'),
            served=dict(type='list', elements='str', default=[]),
            protect=dict(type='list', elements='str', default=[]),
            keep=dict(type='int', default=2),
            caches_path=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    path = module.params['path']
    active = module.params['active']
    venvs = installed_venvs(path)
    try:
        protected = ([active] if active else []) + [name for name in module.params['protect'] if name != active]
        kept, removed = prune_plan(venvs, venv_names(module.params['served'], path), module.params['keep'], protected)
    except VenvError as exc:
        module.fail_json(msg='%s: %s' % (path, exc), venvs=sorted(venvs))
    caches_path = module.params['caches_path']
    removed_caches = stale_caches(folders(caches_path), kept) if caches_path else []
    leftovers = [(folder, name) for folder in [path] + ([caches_path] if caches_path else [])
                 for name in (os.listdir(folder) if os.path.isdir(folder) else []) if being_removed(folder, name)]
    changed = bool(removed) or bool(removed_caches) or bool(leftovers)
    if changed and not module.check_mode:
        try:
            for name in removed:
                remove_folder(path, name)
            for name in removed_caches:
                remove_folder(caches_path, name)
            for folder, name in leftovers:
                shutil.rmtree(os.path.join(folder, name))
        except (IOError, OSError) as exc:
            module.fail_json(msg='cannot prune the venvs of %s: %s' % (path, exc), venvs=sorted(venvs))
    module.exit_json(changed=changed, venvs=sorted(venvs), kept=kept, removed=removed, removed_caches=removed_caches)


if __name__ == '__main__':
    main()
