# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import functools
import os

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._vm_restart import VmRestartError, passthrough_settings, restart_switches


# The role's own defaults, so that a VM's settings fall back to exactly what the role would use.
_ROLE_DEFAULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              'roles', 'proxmox_gpu_vm', 'defaults', 'main.yml')


@functools.lru_cache(maxsize=None)
def _read_role_defaults():
    """The role's defaults file, read once per process: the roles template these settings at every use."""
    with open(_ROLE_DEFAULTS) as handle:
        return yaml.safe_load(handle) or {}


def vm_passthrough_settings(overlay, vm_vars, host_vars):
    try:
        return passthrough_settings(overlay or {}, vm_vars or {}, host_vars or {}, _read_role_defaults())
    except (IOError, OSError, yaml.YAMLError, VmRestartError) as exc:
        raise AnsibleFilterError('vm_passthrough_settings: %s' % exc)


def vm_restart_switches(vm, hostvars, vm_host=''):
    try:
        return restart_switches(vm, hostvars[vm], vm_host or '', hostvars[vm_host] if vm_host and vm_host in hostvars else {})
    except VmRestartError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {
            'vm_passthrough_settings': vm_passthrough_settings,
            'vm_restart_switches': vm_restart_switches,
        }
