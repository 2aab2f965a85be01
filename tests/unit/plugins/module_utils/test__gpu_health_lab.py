# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's nvidia-smi -q -x, read by the real parser: healthy as planted nothing, each planted fault
gives the verdict the same fault gives in the real H200 capture's variants."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._gpu_health import assess, parse_smi_xml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
LAB_NVIDIA_SMI = os.path.join(REPO, 'molecule', 'resources', 'lab', 'sim', 'nvidia-smi')
REAL_XML = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'gpu_health', 'h200-2026-12-01',
                        'q.xml')


def lab_smi(tmp_path, faults=None, *args):
    """What the lab's nvidia-smi prints with ``faults`` planted; (rc, stdout)."""
    planted = tmp_path / 'gpu-faults.json'
    planted.write_text(json.dumps(faults or {}))
    env = dict(os.environ, INFEROPS_LAB_GPU_FAULTS=str(planted), INFEROPS_LAB_GPU_COUNT='8')
    env.pop('INFEROPS_LAB_VM_HW', None)
    result = subprocess.run([sys.executable, LAB_NVIDIA_SMI] + list(args), capture_output=True, text=True, env=env,
                            check=False)
    return result.returncode, result.stdout


def lab_xml(tmp_path, faults=None, *args):
    rc, out = lab_smi(tmp_path, faults, '-q', '-x', *args)
    assert rc == 0, out
    return out


def paths(element, prefix=''):
    found = set()
    for child in element:
        path = prefix + child.tag
        found.add(path)
        found |= paths(child, path + '/')
    return found


def test_the_lab_xml_has_the_real_root_and_every_health_element_where_the_real_tool_puts_it(tmp_path):
    lab = ElementTree.fromstring(lab_xml(tmp_path))
    with open(REAL_XML) as handle:
        real = ElementTree.fromstring(handle.read())
    assert lab.tag == real.tag == 'nvidia_smi_log'
    assert [child.tag for child in lab][:4] == ['timestamp', 'driver_version', 'cuda_version', 'attached_gpus']
    lab_paths, real_paths = paths(lab.find('gpu')), paths(real.find('gpu'))
    # The lab keeps a subset of the real blocks, never an element the real tool does not print.
    assert lab_paths <= real_paths, sorted(lab_paths - real_paths)
    for path in ('product_name', 'uuid', 'persistence_mode', 'gpu_recovery_action', 'pci/pci_bus_id',
                 'ecc_mode/current_ecc', 'ecc_mode/pending_ecc', 'ecc_errors/volatile/dram_uncorrectable',
                 'ecc_errors/aggregate/dram_uncorrectable', 'ecc_errors/aggregate/sram_threshold_exceeded',
                 'ecc_errors/channel_repair_pending', 'ecc_errors/tpc_repair_pending', 'ecc_errors/unrepairable_memory',
                 'retired_pages/double_bit_retirement/retired_count', 'retired_pages/pending_retirement',
                 'remapped_rows/remapped_row_pending', 'remapped_rows/remapped_row_failure'):
        assert path in lab_paths and path in real_paths, path
    assert lab.find('gpu').get('id') == lab.find('gpu/pci/pci_bus_id').text == '00000000:01:00.0'


def test_the_lab_gpus_are_healthy_when_nothing_is_planted(tmp_path):
    result = assess(lab_xml(tmp_path), kernel_log='', expected_gpu_count=8)
    assert result['healthy'], result['problems']
    assert result['gpu_warnings'] == []
    assert result['gpu_count'] == 8 and result['driver_version'] == '580.95.05'
    assert result['verdict'] == 'healthy: 8 GPUs (NVIDIA RTX PRO 6000 Blackwell Server Edition) fit to serve'
    assert [gpu['bus_id'] for gpu in result['gpus']] == ['0000:%02x:00.0' % (slot + 1) for slot in range(8)]


@pytest.mark.parametrize('fault, check, action', [
    ({'recovery_action': 'Reset'}, 'recovery_action', 'reset'),
    ({'recovery_action': 'Reboot'}, 'recovery_action', 'reboot'),
    ({'recovery_action': 'Drain and Reset'}, 'recovery_action', 'reset'),
    ({'row_remapping': 'pending'}, 'row_remapping_pending', 'reset'),
    ({'row_remapping': 'failed'}, 'row_remapping_failure', 'replace'),
    ({'ecc_uncorrectable': 2}, 'ecc_uncorrectable', 'reset'),
    ({'retired_pages_pending': True}, 'retired_pages_pending', 'reset'),
])
def test_each_planted_fault_makes_its_gpu_unhealthy(tmp_path, fault, check, action):
    result = assess(lab_xml(tmp_path, {'3': fault}), kernel_log='', expected_gpu_count=8)
    assert not result['healthy']
    assert result['action'] == action
    problems = [(gpu['index'], finding['check']) for gpu in result['gpus'] for finding in gpu['findings']
                if finding['severity'] == 'problem']
    assert problems == [(3, check)]
    assert result['problems'][0].startswith('GPU 3 (0000:04:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition): ')


def test_persistence_mode_off_is_a_warning(tmp_path):
    result = assess(lab_xml(tmp_path, {'1': {'persistence_mode': 'Disabled'}}), kernel_log='', expected_gpu_count=8)
    assert result['healthy']
    assert result['gpu_warnings'][0].startswith('GPU 1 (0000:02:00.0, ')


def test_a_missing_gpu_is_listed_by_no_command_and_fails_the_expected_count(tmp_path):
    planted = {'5': {'missing': True}}
    result = assess(lab_xml(tmp_path, planted), kernel_log='', expected_gpu_count=8)
    assert not result['healthy'] and result['action'] == 'reboot'
    assert result['gpu_count'] == 7
    assert '0000:06:00.0' not in [gpu['bus_id'] for gpu in result['gpus']]
    # Numbered without a gap, each GPU on its own bus: index 5 is now the GPU of slot 6.
    assert result['gpus'][5]['bus_id'] == '0000:07:00.0'
    assert result['problems'] == [
        'nvidia-smi lists 7 of the 8 GPUs expected: a GPU fell off the bus, was not passed through to the VM or '
        'failed to initialise; read the kernel log, then reboot the node (on a Proxmox VM, a power cycle from the '
        'host).']
    rc, listed = lab_smi(tmp_path, planted, '-L')
    assert rc == 0 and len(listed.splitlines()) == 7
    rc, matrix = lab_smi(tmp_path, planted, 'topo', '-m')
    assert rc == 0 and 'GPU6\t' in matrix and 'GPU7' not in matrix


def test_an_xid_line_for_a_lab_bus_counts_for_that_gpu(tmp_path):
    log = '[ 5120.118331] NVRM: Xid (PCI:0000:04:00): 79, GPU has fallen off the bus.\n'
    result = assess(lab_xml(tmp_path), kernel_log=log, expected_gpu_count=8)
    assert not result['healthy'] and result['action'] == 'reboot'
    assert result['verdict'] == 'unhealthy (reboot): GPU 3 Xid 79'


def test_one_gpu_asked_by_index_keeps_the_attached_count(tmp_path):
    parsed = parse_smi_xml(lab_xml(tmp_path, {'2': {'recovery_action': 'Reboot'}}, '-i', '2'))
    assert parsed['attached_gpus'] == 8
    assert [(gpu['bus_id'], gpu['recovery_action']) for gpu in parsed['gpus']] == [('0000:03:00.0', 'Reboot')]
    rc, out = lab_smi(tmp_path, None, '-q', '-x', '-i', '9')
    assert rc == 6 and out == 'No devices were found\n'


def test_an_unreadable_fault_file_plants_nothing(tmp_path):
    (tmp_path / 'broken.json').write_text('{"3": ')
    env = dict(os.environ, INFEROPS_LAB_GPU_FAULTS=str(tmp_path / 'broken.json'), INFEROPS_LAB_GPU_COUNT='8')
    out = subprocess.run([sys.executable, LAB_NVIDIA_SMI, '-q', '-x'], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert assess(out, kernel_log='', expected_gpu_count=8)['healthy']
