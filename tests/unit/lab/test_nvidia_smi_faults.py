# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's planted GPU faults: they hold until the GPUs are reset, which in the Proxmox lab is a
new start of the VM (the host's qm writes a new boot id into the VM hardware file)."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import sys

SIM = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'molecule', 'resources', 'lab', 'sim')
sys.path.insert(0, os.path.abspath(SIM))

import nvidia_smi_q  # noqa: E402  pylint: disable=wrong-import-position


def _plant(tmp_path, monkeypatch, faults, boot_id=None):
    faults_file = tmp_path / 'gpu-faults.json'
    faults_file.write_text(json.dumps(faults))
    monkeypatch.setenv('INFEROPS_LAB_GPU_FAULTS', str(faults_file))
    if boot_id is not None:
        hardware = tmp_path / '100.json'
        hardware.write_text(json.dumps({'vmid': 100, 'status': 'running', 'boot_id': boot_id, 'gpus': []}))
        monkeypatch.setenv('INFEROPS_LAB_VM_HW', str(hardware))
    else:
        monkeypatch.delenv('INFEROPS_LAB_VM_HW', raising=False)
        monkeypatch.setattr(nvidia_smi_q, 'VM_HW_KNOB', str(tmp_path / 'no-knob'))


def test_a_planted_fault_holds_outside_the_proxmox_lab(tmp_path, monkeypatch):
    _plant(tmp_path, monkeypatch, {'3': {'recovery_action': 'Reset'}})
    assert nvidia_smi_q.faults() == {3: {'recovery_action': 'Reset'}}


def test_a_fault_tied_to_a_vm_start_holds_while_the_vm_runs(tmp_path, monkeypatch):
    _plant(tmp_path, monkeypatch, {'vm_boot_id': 'boot-1', '0': {'row_remapping': 'pending'}}, boot_id='boot-1')
    assert nvidia_smi_q.faults() == {0: {'row_remapping': 'pending'}}


def test_a_new_start_of_the_vm_resets_its_gpus(tmp_path, monkeypatch):
    _plant(tmp_path, monkeypatch, {'vm_boot_id': 'boot-1', '0': {'recovery_action': 'Reset'}}, boot_id='boot-2')
    assert nvidia_smi_q.faults() == {}
