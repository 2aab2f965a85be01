# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of deploy_state: the inputs fingerprint of the node's stack.

Every documented variable of the stack's roles, resolved for the node with the roles' own
defaults beneath its variables (a play that has not included a role still sees what that role
would use), and the digest of the collection's code. The plan and the record compute it the
same way, so an unchanged inventory on an unchanged collection gives the same fingerprint.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

from ansible.plugins.action import ActionBase
from ansible_collections.inferops.serving.plugins.module_utils._deploy_state import (
    LAYER_CODE_PATHS,
    LAYER_EXTRA_INPUTS,
    STACK_ROLES,
    code_digest,
    inputs_fingerprint,
)

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Unresolvable values (a default that needs a fact this play did not gather) still count, as such.
UNRESOLVED = '<unresolved>'


def _plain(value):
    """Lazy or tagged containers as plain JSON data."""
    if isinstance(value, dict):
        return dict(('%s' % key, _plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        return '%s' % value
    return value


class ActionModule(ActionBase):

    _VALID_ARGS = frozenset(('state', 'path', 'history', 'fingerprint', 'layers', 'files', 'packages', 'venv',
                             'distributions', 'service'))

    def _role_file(self, role, *parts):
        path = os.path.join(COLLECTION_ROOT, 'roles', role, *parts)
        return self._loader.load_from_file(path, trusted_as_template=True) if os.path.exists(path) else None

    def _resolve(self, templar, name):
        try:
            resolve = getattr(templar, 'resolve_variable_expression', None)
            value = resolve(name) if resolve else templar.template('{{ %s }}' % name)
            return _plain(templar.template(value))
        except Exception:  # any template error: the value is what it is in both plan and record
            return UNRESOLVED

    def fingerprints(self, task_vars):
        """The stack's inputs fingerprint, and each layer's own (LAYER_CODE_PATHS)."""
        names = {}
        defaults = {}
        for role in STACK_ROLES:
            specs = (self._role_file(role, 'meta', 'argument_specs.yml') or {}).get('argument_specs') or {}
            names[role] = sorted(((specs.get('main') or {}).get('options') or {}).keys())
            defaults.update(self._role_file(role, 'defaults', 'main.yml') or {})
        variables = dict(defaults)
        variables.update(task_vars)
        templar = self._templar.copy_with_new_env(available_variables=variables)
        resolved = dict((name, self._resolve(templar, name)) for role in STACK_ROLES for name in names[role])
        layers = dict((layer, inputs_fingerprint(dict((name, resolved[name])
                                                      for name in names[layer] + list(LAYER_EXTRA_INPUTS.get(layer, ()))),
                                                 code_digest(COLLECTION_ROOT, paths)))
                      for layer, paths in LAYER_CODE_PATHS.items())
        return inputs_fingerprint(resolved, code_digest(COLLECTION_ROOT)), layers

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        if not args.get('fingerprint'):
            args['fingerprint'], layers = self.fingerprints(task_vars or {})
            args.setdefault('layers', layers)
        result.update(self._execute_module(module_name='inferops.serving.deploy_state', module_args=args,
                                           task_vars=task_vars))
        return result
