# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
name: playbook_cli
author: inferops.serving maintainers (!UNKNOWN)
version_added: 0.2.0
short_description: The options this ansible-playbook run was started with, to start a check-mode run alike
description:
  - Returns the command-line options of the running C(ansible-playbook) that a second run needs to see the same
    inventory variables - extra variables (C(-e)), vault identities and password files, forks, become and the
    connection user - as a list of arguments.
  - Used by deploy.yml to run the fleet plan with C(--check), where C(ansible_check_mode) is true for every role
    (a play's C(check_mode) keyword does not set it).
options: {}
'''

EXAMPLES = r'''
- name: Run a playbook in check mode with the same extra variables
  ansible.builtin.command:
    argv: "{{ ['ansible-playbook', '--check', 'plan.yml'] + lookup('inferops.serving.playbook_cli') }}"
'''

RETURN = r'''
_raw:
  description: Arguments for ansible-playbook (no inventory, limit or playbook).
  type: list
  elements: str
'''

from ansible import context
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        args = context.CLIARGS
        argv = []
        for extra in args.get('extra_vars') or ():
            argv += ['-e', extra]
        for vault_id in args.get('vault_ids') or ():
            argv += ['--vault-id', vault_id]
        for password_file in args.get('vault_password_files') or ():
            argv += ['--vault-password-file', password_file]
        if args.get('forks'):
            argv += ['--forks', str(args['forks'])]
        if args.get('become'):
            argv.append('--become')
        if args.get('remote_user'):
            argv += ['--user', args['remote_user']]
        if args.get('private_key_file'):
            argv += ['--private-key', args['private_key_file']]
        return [argv]
