# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of rollback_by_files: runs the sequence of _rollback on the node, one module at a time."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible_collections.inferops.serving.plugins.module_utils._rollback import rollback_by_files

REQUIRED = ('path', 'service', 'ready_url', 'ready_timeout', 'history', 'node', 'deploy')


class ActionModule(ActionBase):

    _VALID_ARGS = frozenset(REQUIRED)
    # A rollback changes the node: in check mode nothing was changed that it could put back.
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        missing = [name for name in REQUIRED if args.get(name) in (None, '')]
        if missing:
            result.update(failed=True, msg='rollback_by_files needs %s.' % ', '.join(missing))
            return result
        try:
            ready_timeout = int(args['ready_timeout'])
        except (TypeError, ValueError):
            result.update(failed=True, msg='rollback_by_files: ready_timeout is seconds (a whole number), got %r'
                          % (args['ready_timeout'],))
            return result

        def run_module(name, module_args):
            try:
                return self._execute_module(module_name=name, module_args=module_args, task_vars=task_vars)
            except AnsibleConnectionFailure:
                raise
            except Exception as error:  # a module that could not run is a step that failed: converge instead
                return {'failed': True, 'msg': '%s' % error}

        result.update(rollback_by_files(run_module, args['path'], args['service'], args['ready_url'], ready_timeout,
                                        args['history'], args['node'], args['deploy']))
        return result
