# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._vm_restart import VmRestartError, passthrough_settings, restart_switches


def test_a_vm_and_host_that_set_nothing_restart_nothing():
    assert restart_switches('gpu-node', {}, 'pve1', {}) == {'reboot': False, 'power_cycle': False}


def test_the_host_switch_stands_for_its_vms():
    assert restart_switches('gpu-node', {}, 'pve1', {'proxmox_gpu_vm_reboot': True}) == {'reboot': True, 'power_cycle': False}


def test_the_vm_or_the_command_line_outranks_its_host():
    switches = restart_switches('gpu-node', {'proxmox_gpu_vm_reboot': 'false', 'proxmox_gpu_vm_power_cycle': 'yes'}, 'pve1',
                                {'proxmox_gpu_vm_reboot': True, 'proxmox_gpu_vm_power_cycle': False})
    assert switches == {'reboot': False, 'power_cycle': True}


def test_a_vm_without_a_host_reads_only_its_own_switches():
    assert restart_switches('gpu-node', {'proxmox_gpu_vm_power_cycle': 1}, '', {'proxmox_gpu_vm_reboot': True}) == {
        'reboot': False, 'power_cycle': True}


@pytest.mark.parametrize('typed', ['true', 'True', 'on', '1', 1, True])
def test_every_way_of_typing_true_is_true(typed):
    assert restart_switches('gpu-node', {'proxmox_gpu_vm_reboot': typed}, 'pve1', {})['reboot'] is True


@pytest.mark.parametrize('vm_vars, host_vars, words', [
    ({'proxmox_gpu_vm_reboot': 'maybe'}, {}, ["proxmox_gpu_vm_reboot must be true or false", "'maybe'",
                                              'Set on the VM gpu-node (its variables or the command line): change it to true or false.']),
    ({}, {'proxmox_gpu_vm_power_cycle': 'ture'}, ["proxmox_gpu_vm_power_cycle must be true or false", "'ture'",
                                                  'Set on its Proxmox host pve1: change it to true or false.']),
    ({'proxmox_gpu_vm_reboot': None}, {}, ['proxmox_gpu_vm_reboot must be true or false, got null.']),
    ({'proxmox_gpu_vm_reboot': ''}, {}, ['proxmox_gpu_vm_reboot must be true or false']),
    ({'proxmox_gpu_vm_reboot': 2}, {}, ['proxmox_gpu_vm_reboot must be true or false']),
    ({'proxmox_gpu_vm_reboot': ['true']}, {}, ['proxmox_gpu_vm_reboot must be true or false']),
])
def test_a_switch_that_is_not_a_boolean_is_refused_saying_where_it_was_set(vm_vars, host_vars, words):
    with pytest.raises(VmRestartError) as refused:
        restart_switches('gpu-node', vm_vars, 'pve1', host_vars)
    for word in words:
        assert word in str(refused.value), str(refused.value)


def test_both_wrong_switches_are_named_at_once():
    with pytest.raises(VmRestartError) as refused:
        restart_switches('gpu-node', {'proxmox_gpu_vm_reboot': 'maybe'}, 'pve1', {'proxmox_gpu_vm_power_cycle': 'soon'})
    assert 'proxmox_gpu_vm_reboot' in str(refused.value) and 'proxmox_gpu_vm_power_cycle' in str(refused.value)


HOST_VARS = {'proxmox_gpu_vm_qm': '/opt/lab/qm', 'proxmox_gpu_vm_sysfs_root': '/srv/host-sysfs', 'proxmox_gpu_vm_shutdown_timeout': 60}
VM_VARS = {'proxmox_gpu_vm_clique': None, 'proxmox_gpu_vm_numa': True,
           # A host-wide setting on the VM is not its host's: never read.
           'proxmox_gpu_vm_qm': '/usr/bin/wrong-qm'}


ROLE_DEFAULTS = {'proxmox_gpu_vm_sysfs_root': '/sys', 'proxmox_gpu_vm_qm': 'qm', 'proxmox_gpu_vm_machine': 'q35',
                 'proxmox_gpu_vm_cpu': 'host', 'proxmox_gpu_vm_shutdown_timeout': 180}


def test_the_vm_gets_its_own_passthrough_and_its_hosts_settings_else_the_roles_defaults():
    assert passthrough_settings({}, VM_VARS, HOST_VARS, ROLE_DEFAULTS) == {
        'proxmox_gpu_vm_clique': None, 'proxmox_gpu_vm_numa': True, 'proxmox_gpu_vm_hugepages': None,
        'proxmox_gpu_vm_sysfs_root': '/srv/host-sysfs', 'proxmox_gpu_vm_qm': '/opt/lab/qm',
        'proxmox_gpu_vm_machine': 'q35', 'proxmox_gpu_vm_cpu': 'host', 'proxmox_gpu_vm_shutdown_timeout': 60}


def test_a_host_experiments_overlay_wins_over_the_vms_inventory_also_when_it_sets_none():
    settings = passthrough_settings({'proxmox_gpu_vm_clique': 'pve-clique-0', 'proxmox_gpu_vm_numa': None}, VM_VARS, {},
                                    ROLE_DEFAULTS)
    assert settings['proxmox_gpu_vm_clique'] == 'pve-clique-0'
    assert settings['proxmox_gpu_vm_numa'] is None
    assert settings['proxmox_gpu_vm_qm'] == 'qm' and settings['proxmox_gpu_vm_shutdown_timeout'] == 180


def test_the_filter_falls_back_to_the_roles_own_defaults_file():
    """One source: the defaults the filter falls back to are the ones the role ships."""
    import yaml
    from ansible_collections.inferops.serving.plugins.filter.vm import FilterModule
    with open(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'proxmox_gpu_vm', 'defaults',
                           'main.yml')) as handle:
        shipped = yaml.safe_load(handle)
    settings = FilterModule().filters()['vm_passthrough_settings']({}, {}, {})
    assert settings['proxmox_gpu_vm_shutdown_timeout'] == shipped['proxmox_gpu_vm_shutdown_timeout']
    assert settings['proxmox_gpu_vm_qm'] == shipped['proxmox_gpu_vm_qm']


def test_defaults_without_a_host_wide_setting_are_named():
    with pytest.raises(VmRestartError, match='proxmox_gpu_vm_cpu'):
        passthrough_settings({}, {}, {}, dict((k, v) for k, v in ROLE_DEFAULTS.items() if k != 'proxmox_gpu_vm_cpu'))
