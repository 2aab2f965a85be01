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
    names them after the set and a digest of its pins). This module lists them, notes which one
    serves now (O(active)) in C(activations.json) in O(path), and removes the venvs beyond O(keep).
  - The venvs that served most recently stay first, then the newest installed; O(active) and
    O(protect) always stay. A venv is renamed before it is removed, so a run killed half way
    never leaves a partial venv under a name the role would take for installed.
  - A folder in O(path) without C(pyvenv.cfg) is not a venv and is left alone.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  path:
    description: The folder that holds one venv per release set.
    type: path
    required: true
  active:
    description: Name of the venv the server runs now (a folder in O(path)); noted as the latest that served.
    type: str
  protect:
    description: Names of other venvs never to remove in this run.
    type: list
    elements: str
    default: []
  keep:
    description: How many venvs stay, O(active) and O(protect) included; V(1) or more.
    type: int
    default: 2
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
activations:
  description: The venvs that served, oldest first, as noted after this run.
  returned: always
  type: list
  elements: str
'''

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._sglang_venvs import (
    ACTIVATIONS_FILE,
    VenvError,
    activated,
    activations_text,
    parse_activations,
    prune_plan,
)

# A venv being removed is first renamed to this prefix and a later run finishes the removal.
REMOVING_PREFIX = '.removing-'


def installed_venvs(path):
    """name -> install time (mtime of pyvenv.cfg) of every venv in ``path``."""
    venvs = {}
    for name in sorted(os.listdir(path)) if os.path.isdir(path) else []:
        marker = os.path.join(path, name, 'pyvenv.cfg')
        if not name.startswith('.') and os.path.isfile(marker):
            venvs[name] = os.stat(marker).st_mtime
    return venvs


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def write_activations(module, path, history):
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % ACTIVATIONS_FILE, dir=path)
    with os.fdopen(fd, 'w') as handle:
        handle.write(activations_text(history))
    os.chmod(tmp, 0o644)
    module.atomic_move(tmp, os.path.join(path, ACTIVATIONS_FILE))


def remove_venv(path, name):
    doomed = os.path.join(path, REMOVING_PREFIX + name)
    os.rename(os.path.join(path, name), doomed)
    shutil.rmtree(doomed)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            active=dict(type='str'),
            protect=dict(type='list', elements='str', default=[]),
            keep=dict(type='int', default=2),
        ),
        supports_check_mode=True,
    )
    path = module.params['path']
    active = module.params['active']
    venvs = installed_venvs(path)
    history_path = os.path.join(path, ACTIVATIONS_FILE)
    try:
        history = parse_activations(read_text(history_path))
        protected = ([active] if active else []) + [name for name in module.params['protect'] if name != active]
        noted = activated(history, active) if active else history
        kept, removed = prune_plan(venvs, noted, module.params['keep'], protected)
        # The history names only venvs that are still there.
        noted = [name for name in noted if name not in removed]
    except VenvError as exc:
        module.fail_json(msg='%s: %s' % (path, exc), venvs=sorted(venvs))
    leftovers = [name for name in (os.listdir(path) if os.path.isdir(path) else [])
                 if name.startswith(REMOVING_PREFIX)]
    changed = noted != history or bool(removed) or bool(leftovers)
    if changed and not module.check_mode:
        try:
            if noted != history:
                write_activations(module, path, noted)
            for name in removed:
                remove_venv(path, name)
            for name in leftovers:
                shutil.rmtree(os.path.join(path, name))
        except (IOError, OSError) as exc:
            module.fail_json(msg='cannot prune the venvs of %s: %s' % (path, exc), venvs=sorted(venvs))
    module.exit_json(changed=changed, venvs=sorted(venvs), kept=kept, removed=removed, activations=noted)


if __name__ == '__main__':
    main()
