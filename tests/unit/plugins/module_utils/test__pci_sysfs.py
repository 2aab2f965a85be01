# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading GPUs from a sysfs tree: the lab's simulated VM and hand-built bare-metal shapes."""

import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._pci_sysfs import (
    PciSysfsError,
    link_class,
    list_gpus,
    list_rdma_devices,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.common import normalize_bus_id

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MAKE_SYSFS = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim", "make-sysfs.py")


def make_lab_tree(root, gpus):
    subprocess.run([sys.executable, MAKE_SYSFS, str(root), "--gpus", str(gpus)], check=True)
    return str(root)


def add_device(root, path_parts, vendor, pci_class, numa="-1", cpulist="0-63", driver=None):
    """Create a device directory under ROOT/devices and its bus/pci/devices symlink."""
    directory = os.path.join(root, "devices", *path_parts)
    os.makedirs(directory)
    for name, value in (("vendor", vendor), ("device", "0x2330"), ("class", pci_class),
                        ("numa_node", numa), ("local_cpulist", cpulist)):
        with open(os.path.join(directory, name), "w") as handle:
            handle.write(value + "\n")
    bus_dir = os.path.join(root, "bus", "pci", "devices")
    os.makedirs(bus_dir, exist_ok=True)
    os.symlink(os.path.relpath(directory, bus_dir), os.path.join(bus_dir, path_parts[-1]))
    if driver:
        driver_dir = os.path.join(root, "bus", "pci", "drivers", driver)
        os.makedirs(driver_dir, exist_ok=True)
        os.symlink(os.path.relpath(driver_dir, directory), os.path.join(directory, "driver"))


@pytest.fixture
def switch_tree(tmp_path):
    """Two sockets; socket 0 has a PCIe switch with two GPUs, socket 1 one GPU on a root port."""
    root = str(tmp_path)
    bridge = "0x060400"
    add_device(root, ["pci0000:00", "0000:00:01.0"], "0x8086", bridge, numa="0")
    add_device(root, ["pci0000:00", "0000:00:01.0", "0000:01:00.0"], "0x1000", bridge, numa="0")
    add_device(root, ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0"], "0x1000", bridge, numa="0")
    add_device(root, ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0"], "0x1000", bridge, numa="0")
    add_device(root, ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"],
               "0x10de", "0x030200", numa="0", cpulist="0-31", driver="nvidia")
    add_device(root, ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0"],
               "0x10de", "0x030200", numa="0", cpulist="0-31", driver="nvidia")
    add_device(root, ["pci0000:80", "0000:80:01.0"], "0x8086", bridge, numa="1")
    add_device(root, ["pci0000:80", "0000:80:01.0", "0000:81:00.0"], "0x10de", "0x030000", numa="1",
               cpulist="32-63")
    # A NIC and the GPU's audio function must not be taken for GPUs.
    add_device(root, ["pci0000:80", "0000:80:01.0", "0000:81:00.1"], "0x10de", "0x040300", numa="1")
    add_device(root, ["pci0000:80", "0000:80:02.0"], "0x15b3", "0x020000", numa="1")
    os.makedirs(os.path.join(root, "class", "infiniband", "mlx5_0"))
    return root


def test_lab_tree_lists_eight_gpus_behind_their_own_root_ports(tmp_path):
    gpus = list_gpus(make_lab_tree(tmp_path, 8))
    assert [gpu["bdf"] for gpu in gpus] == ["0000:%02x:00.0" % bus for bus in range(1, 9)]
    assert len({gpu["root_port"] for gpu in gpus}) == 8
    assert all(gpu["device_id"] == "0x2bb5" and gpu["numa_node"] is None for gpu in gpus)
    assert all(gpu["cpu_affinity"] == "0-63" and gpu["switches"] == [] for gpu in gpus)
    assert all(gpu["driver"] is None for gpu in gpus)
    assert link_class(gpus[0], gpus[7]) == "PHB"


def test_lab_tree_matches_the_simulated_nvidia_smi_bus_ids(tmp_path):
    gpus = list_gpus(make_lab_tree(tmp_path, 8))
    smi = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim", "nvidia-smi")
    out = subprocess.run([sys.executable, smi, "--query-gpu=pci.bus_id", "--format=csv,noheader"],
                         check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
    assert [normalize_bus_id(line) for line in out.split()] == [gpu["bdf"] for gpu in gpus]


def test_tree_without_nvidia_devices_gives_an_empty_list(tmp_path):
    root = make_lab_tree(tmp_path, 0)
    assert os.listdir(os.path.join(root, "bus", "pci", "devices"))
    assert list_gpus(root) == []


def test_switch_ports_and_numa_nodes(switch_tree):
    gpus = list_gpus(switch_tree)
    assert [gpu["bdf"] for gpu in gpus] == ["0000:03:00.0", "0000:04:00.0", "0000:81:00.0"]
    first, second, third = gpus
    assert first["root_port"] == "0000:00:01.0"
    assert first["switches"] == ["0000:01:00.0", "0000:02:00.0"]
    assert first["driver"] == "nvidia" and third["driver"] is None
    assert (first["numa_node"], third["numa_node"]) == (0, 1)
    assert third["host_bridge"] == "pci0000:80" and third["cpu_affinity"] == "32-63"
    assert link_class(first, second) == "PIX"
    assert link_class(first, third) == "SYS"
    assert list_rdma_devices(switch_tree) == ["mlx5_0"]


def test_rdma_list_is_empty_without_infiniband_class(tmp_path):
    assert list_rdma_devices(make_lab_tree(tmp_path, 1)) == []


@pytest.mark.parametrize("make", [
    lambda path: str(path / "missing"),
    str,
])
def test_unreadable_root_is_an_error_that_names_what_was_expected(tmp_path, make):
    with pytest.raises(PciSysfsError, match="bus/pci/devices|does not exist"):
        list_gpus(make(tmp_path))


@pytest.mark.parametrize("given, expected", [
    ("00000000:01:00.0", "0000:01:00.0"),
    ("0000:C1:00.0", "0000:c1:00.0"),
    ("00000001:81:00.0", "0001:81:00.0"),
])
def test_bus_ids_from_nvidia_smi_and_sysfs_compare_equal(given, expected):
    assert normalize_bus_id(given) == expected
