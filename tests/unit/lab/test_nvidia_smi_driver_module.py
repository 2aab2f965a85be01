# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's nvidia-smi on a node that names its driver's kernel module (the QEMU guest): it answers
only while that module is loaded and otherwise fails as the real tool does without its driver; a
node that names none (a container) answers as before."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import subprocess
import sys

import pytest

LAB_NVIDIA_SMI = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'molecule', 'resources', 'lab', 'sim',
                              'nvidia-smi')
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")


def lab_smi(module=None):
    env = dict(os.environ, INFEROPS_LAB_GPU_COUNT='8')
    env.pop('INFEROPS_LAB_VM_HW', None)
    env.pop('INFEROPS_LAB_DRIVER_MODULE', None)
    if module is not None:
        env['INFEROPS_LAB_DRIVER_MODULE'] = str(module)
    result = subprocess.run([sys.executable, LAB_NVIDIA_SMI, '--query-gpu=index', '--format=csv,noheader'],
                            capture_output=True, text=True, env=env, check=False)
    return result.returncode, result.stdout


def test_without_its_module_loaded_it_fails_as_the_real_tool_does(tmp_path):
    assert lab_smi(tmp_path / 'sys' / 'module' / 'nvidia') == (9, NO_DRIVER)


def test_with_its_module_loaded_it_lists_the_gpus(tmp_path):
    module = tmp_path / 'sys' / 'module' / 'nvidia'
    module.mkdir(parents=True)
    rc, out = lab_smi(module)
    assert rc == 0
    assert out.split() == [str(index) for index in range(8)]


def test_a_node_that_names_no_module_answers(tmp_path):
    if os.path.exists('/etc/inferops-lab/driver-module'):
        pytest.skip('this host is a lab guest: /etc/inferops-lab/driver-module names its module')
    rc, out = lab_smi()
    assert rc == 0
    assert len(out.split()) == 8
