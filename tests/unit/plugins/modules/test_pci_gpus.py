# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pci_gpus module as Ansible runs it, against the lab's simulated PCI tree."""

import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE = os.path.join(REPO_ROOT, "plugins", "modules", "pci_gpus.py")
MAKE_SYSFS = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim", "make-sysfs.py")


@pytest.mark.parametrize("gpus", [0, 1, 8])
def test_counts_the_gpus_of_the_lab_tree(tmp_path, gpus, run_module):
    root = tmp_path / "sys"
    subprocess.run([sys.executable, MAKE_SYSFS, str(root), "--gpus", str(gpus)], check=True)
    result = run_module(sysfs_root=str(root), _ansible_check_mode=True)
    assert not result.get("failed") and result["changed"] is False
    assert result["count"] == gpus == len(result["gpus"])
    assert all(gpu["device_id"] == "0x2bb5" and gpu["root_port"] for gpu in result["gpus"])


def test_unreadable_root_fails_saying_what_to_set(tmp_path, run_module):
    result = run_module(sysfs_root=str(tmp_path))
    assert result["failed"] and "sysfs_root" in result["msg"] and "bus/pci/devices" in result["msg"]
