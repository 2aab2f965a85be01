# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of role_inputs: the calling role's variables, checked as its argument specs declare them.

Reads the role's meta/argument_specs.yml, resolves every variable of the entry point as the role
sees it, and hands them to _inputs.role_errors (conversion by declared type, then each role's
rules). Nothing runs on the node, so a misplaced secret is refused before any module logs it.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import yaml

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible_collections.inferops.serving.plugins.module_utils._inputs import role_errors

NOTHING_CHANGED = 'Nothing was changed on this host.'


class ActionModule(ActionBase):

    _VALID_ARGS = frozenset(('entry_point',))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        entry_point = self._task.args.get('entry_point', 'main')
        role_path = task_vars.get('role_path')
        if not role_path:
            result.update(failed=True, msg='role_inputs checks the inputs of the role whose task it is: use it in'
                                           " a role's tasks.")
            return result
        specs_path = os.path.join(role_path, 'meta', 'argument_specs.yml')
        try:
            with open(specs_path) as handle:
                specs = (yaml.safe_load(handle) or {}).get('argument_specs') or {}
        except (IOError, OSError, yaml.YAMLError) as exc:
            result.update(failed=True, msg='role_inputs: cannot read %s: %s' % (specs_path, to_text(exc)))
            return result
        if entry_point not in specs:
            result.update(failed=True, msg='role_inputs: %s declares no entry point %s (it has %s).'
                          % (specs_path, entry_point, ', '.join(sorted(specs))))
            return result
        options = specs[entry_point].get('options') or {}

        values, problems = {}, []
        for name in sorted(options):
            if name not in task_vars:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError as exc:
                problems.append('%s cannot be resolved: %s.' % (name, to_text(exc.message).rstrip('.')))
        problems = problems or role_errors(os.path.basename(role_path), options, values, entry_point)
        if problems:
            result.update(failed=True, msg='%s %s' % (' '.join(problems), NOTHING_CHANGED), problems=problems)
        else:
            result.update(changed=False, msg='The inputs of %s (entry point %s) are usable.'
                          % (os.path.basename(role_path), entry_point))
        return result
