# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A GPU VM on Proxmox VE seen from its own side (the serving role's entry points vm_restart and
host_experiment): whether it is to be restarted, and the settings of role inferops.serving.proxmox_gpu_vm
its host applies to it.

Whether it is to be restarted: the two switches of role inferops.serving.proxmox_gpu_vm, as the VM
sets them, else as its Proxmox host does.

An operator sets a switch on the command line (``-e proxmox_gpu_vm_reboot=true``, which every host
sees), on the VM, or on its host for all of its VMs. A value that is not a boolean is refused with
where it was set: read as Jinja's ``bool``, "maybe" or "ture" would silently mean false, and a VM
that waits for its new passthrough would go on without it.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._argument_types import convert
from ansible_collections.inferops.serving.plugins.module_utils._experiment import HOST_OVERLAY_VARIABLES

# Switch -> the key of the answer.
SWITCHES = (('proxmox_gpu_vm_reboot', 'reboot'), ('proxmox_gpu_vm_power_cycle', 'power_cycle'))


class VmRestartError(ValueError):
    pass


def restart_switches(vm, vm_vars, host, host_vars):
    """``{'reboot': bool, 'power_cycle': bool}`` for VM (its variables VM_VARS) on HOST (HOST_VARS;
    an empty name when the VM names no host); a switch set nowhere is false. Raises VmRestartError
    naming every switch that is not a boolean and where it was set."""
    answer, problems = {}, []
    for name, key in SWITCHES:
        if name in vm_vars:
            where, value = 'the VM %s (its variables or the command line)' % vm, vm_vars[name]
        elif host and name in host_vars:
            where, value = 'its Proxmox host %s' % host, host_vars[name]
        else:
            answer[key] = False
            continue
        converted, wrong = convert(name, {'type': 'bool'}, value)
        if value is None:
            wrong = ['%s must be true or false, got null.' % name]
        if wrong:
            problems.append('%s Set on %s: change it to true or false.' % (wrong[0], where))
        answer[key] = converted
    if problems:
        raise VmRestartError(' '.join(problems))
    return answer


# The host's own settings for all of its VMs.
HOST_WIDE_VARIABLES = ('proxmox_gpu_vm_sysfs_root', 'proxmox_gpu_vm_qm', 'proxmox_gpu_vm_machine', 'proxmox_gpu_vm_cpu',
                       'proxmox_gpu_vm_shutdown_timeout')


def passthrough_settings(overlay, vm_vars, host_vars, role_defaults):
    """The settings the VM's host applies to it: each per-VM passthrough setting (clique, NUMA, huge
    pages) from OVERLAY (a host experiment's; empty: none) where it sets it, else from the VM's
    variables VM_VARS (None where unset); the host-wide ones from its host's variables HOST_VARS,
    else ROLE_DEFAULTS (role inferops.serving.proxmox_gpu_vm's defaults/main.yml, as loaded). A
    host-wide setting on the VM is not the host's and is not read."""
    missing = [name for name in HOST_WIDE_VARIABLES if name not in role_defaults]
    if missing:
        raise VmRestartError('the defaults of role proxmox_gpu_vm have no %s' % ', '.join(missing))
    settings = dict((name, overlay[name] if name in overlay else vm_vars.get(name)) for name in HOST_OVERLAY_VARIABLES)
    settings.update((name, host_vars.get(name, role_defaults[name])) for name in HOST_WIDE_VARIABLES)
    return settings
