# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Proxmox host's sysfs: IOMMU, vfio-pci, IOMMU groups and ACS, on the lab's host trees."""

import os
import struct
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._proxmox_host import (
    acs_warnings,
    gpu_host_info,
    host_problems,
    iommu_present,
    parse_acs,
)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MAKE_HOST_SYSFS = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim", "make-host-sysfs.py")


def host_tree(tmp_path, *args):
    root = str(tmp_path / "sys")
    subprocess.run([sys.executable, MAKE_HOST_SYSFS, root, "--gpus", "2"] + list(args), check=True)
    return root


def gpus_of(root):
    return [gpu_host_info(root, bdf) for bdf in ("0000:81:00.0", "0000:82:00.0")]


def test_ready_host_has_no_problem(tmp_path):
    root = host_tree(tmp_path)
    gpus = gpus_of(root)
    assert iommu_present(root)
    assert host_problems(True, gpus, 100) == []
    first = gpus[0]
    assert first["driver"] == "vfio-pci" and first["iommu_group"] == "10"
    assert [m["bdf"] for m in first["group_members"]] == ["0000:81:00.0", "0000:81:00.1"]
    assert [p["bdf"] for p in first["ports"]] == ["0000:80:01.1"]
    acs = first["ports"][0]["acs"]
    assert acs["offset"] == 0x148 and acs["redirects_p2p"]
    assert [name for name, on in acs["control"].items() if on] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    assert len(acs_warnings(gpus)) == 2
    assert "0000:80:01.1 above GPU 0000:81:00.0" in acs_warnings(gpus)[0]


def test_no_iommu_says_how_to_enable_it(tmp_path):
    root = host_tree(tmp_path, "--no-iommu")
    problems = host_problems(iommu_present(root), gpus_of(root), 100)
    assert problems[0].startswith("IOMMU not present: /sys/class/iommu is empty")
    assert "intel_iommu=on iommu=pt" in problems[0]
    assert any("has no IOMMU group" in p for p in problems) is False  # one cause, one message


def test_gpu_on_nvidia_and_audio_on_snd_hda_intel(tmp_path):
    root = host_tree(tmp_path, "--gpu-driver", "nvidia", "--audio-driver", "snd_hda_intel")
    problems = host_problems(True, gpus_of(root), 100)
    assert "GPU 0000:81:00.0 is bound to nvidia, not vfio-pci: add 'options vfio-pci ids=10de:2bb5'" in problems[0]
    assert any("IOMMU group 10 of GPU 0000:81:00.0 also holds 0000:81:00.1 (driver snd_hda_intel)" in p
               for p in problems)
    assert len(problems) == 4


def test_missing_gpu_is_named(tmp_path):
    root = host_tree(tmp_path)
    problems = host_problems(True, [gpu_host_info(root, "0000:c1:00.0")], 100)
    assert problems == ["GPU 0000:c1:00.0 (for VM 100) is not on this host's PCI bus: check proxmox_gpu_vm_gpus "
                        "against `lspci -D -d 10de:`."]


def test_acs_off_gives_no_warning(tmp_path):
    root = host_tree(tmp_path, "--no-acs")
    assert acs_warnings(gpus_of(root)) == []


@pytest.mark.parametrize("config", [b"", b"\x00" * 256, b"\x00" * 4096])
def test_config_without_extended_space_or_acs(config):
    assert parse_acs(config) is None


def test_acs_found_after_other_capabilities():
    config = bytearray(4096)
    struct.pack_into("<I", config, 0x100, 0x0001 | (2 << 16) | (0x200 << 20))   # AER -> 0x200
    struct.pack_into("<I", config, 0x200, 0x000B | (1 << 16) | (0x300 << 20))   # vendor specific -> 0x300
    struct.pack_into("<I", config, 0x300, 0x000D | (1 << 16))                  # ACS, last
    struct.pack_into("<HH", config, 0x304, 0x007F, 0x0001)
    acs = parse_acs(bytes(config))
    assert acs["offset"] == 0x300 and acs["control"]["SrcValid"] and not acs["redirects_p2p"]
    assert all(acs["capabilities"].values())
