# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only module: returns the facts it is given, as if setup had gathered them."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={'facts': {'type': 'dict', 'required': True}}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts=module.params['facts'])


if __name__ == '__main__':
    main()
