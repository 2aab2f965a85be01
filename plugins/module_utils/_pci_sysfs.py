# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read NVIDIA GPUs and their PCI ancestry from a sysfs tree.

Works before any NVIDIA driver is installed: it needs only the kernel's PCI
view (`<root>/bus/pci/devices/<bdf>` symlinks into `<root>/devices/pci<dom>:<bus>/...`).
The root is a parameter so that the lab's simulated tree and saved copies of
another host's /sys can be read the same way.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import re

from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    bridge_link_class,
    normalize_bus_id,
)

NVIDIA_VENDOR_ID = "0x10de"
# PCI base class 0x03: display controller (VGA 0x0300, 3D 0x0302). Data-centre
# GPUs report 3D, workstation cards VGA; both count.
DISPLAY_BASE_CLASS = "0x03"
BRIDGE_CLASS_PREFIX = "0x0604"

_BDF = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_HOST_BRIDGE_DIR = re.compile(r"^pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}$")


class PciSysfsError(Exception):
    """The sysfs root cannot be read as a PCI tree."""


def read_attribute(path):
    """A sysfs attribute's value, stripped; None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _read_int(path):
    raw = read_attribute(path)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def pci_devices_dir(sysfs_root):
    return os.path.join(sysfs_root, "bus", "pci", "devices")


def check_root(sysfs_root):
    """Raise PciSysfsError unless sysfs_root holds a readable PCI device list."""
    devices_dir = pci_devices_dir(sysfs_root)
    if not os.path.isdir(sysfs_root):
        raise PciSysfsError("sysfs root %s does not exist or is not a directory" % sysfs_root)
    if not os.path.isdir(devices_dir):
        raise PciSysfsError("%s has no bus/pci/devices: expected a sysfs tree (like /sys) with the PCI bus in it"
                            % sysfs_root)
    try:
        return sorted(os.listdir(devices_dir))
    except OSError as exc:
        raise PciSysfsError("cannot list %s: %s" % (devices_dir, exc))


def _device_info(device_dir, bdf):
    return {
        "bdf": bdf,
        "vendor_id": read_attribute(os.path.join(device_dir, "vendor")),
        "device_id": read_attribute(os.path.join(device_dir, "device")),
        "class": read_attribute(os.path.join(device_dir, "class")),
    }


def _ancestry(sysfs_root, device_path):
    """Split the resolved device path into host bridge and upstream bridges."""
    devices_root = os.path.realpath(os.path.join(sysfs_root, "devices"))
    relative = os.path.relpath(device_path, devices_root)
    parts = relative.split(os.sep)
    host_bridge = None
    bridges = []
    for index, part in enumerate(parts[:-1]):
        if _HOST_BRIDGE_DIR.match(part):
            host_bridge = part
            bridges = []
            continue
        if _BDF.match(part):
            directory = os.path.join(devices_root, *parts[:index + 1])
            bridges.append(_device_info(directory, part))
    return host_bridge, bridges


def read_cpulist(device_dir):
    cpulist = read_attribute(os.path.join(device_dir, "local_cpulist"))
    return cpulist or None


def list_gpus(sysfs_root):
    """Return the NVIDIA display/3D controllers under sysfs_root, sorted by bus id.

    Each entry: bdf, vendor_id, device_id, class, subsystem_vendor_id,
    subsystem_device_id, numa_node (None where the kernel says -1), cpu_affinity
    (local_cpulist), link_speed, link_width, driver (bound driver or None),
    host_bridge, root_port, switches (bridges between root port and GPU,
    nearest the root first) and pci_path (every bridge from the host bridge down).
    """
    names = check_root(sysfs_root)
    devices_dir = pci_devices_dir(sysfs_root)
    gpus = []
    for name in names:
        link = os.path.join(devices_dir, name)
        vendor = read_attribute(os.path.join(link, "vendor"))
        pci_class = read_attribute(os.path.join(link, "class"))
        if vendor is None or pci_class is None:
            continue
        if vendor.lower() != NVIDIA_VENDOR_ID or not pci_class.lower().startswith(DISPLAY_BASE_CLASS):
            continue
        real = os.path.realpath(link)
        host_bridge, upstream = _ancestry(sysfs_root, real)
        bridges = [entry for entry in upstream if (entry["class"] or "").lower().startswith(BRIDGE_CLASS_PREFIX)]
        numa = _read_int(os.path.join(link, "numa_node"))
        driver_link = os.path.join(link, "driver")
        driver = os.path.basename(os.path.realpath(driver_link)) if os.path.islink(driver_link) else None
        width = _read_int(os.path.join(link, "current_link_width"))
        gpus.append({
            "bdf": normalize_bus_id(name),
            "vendor_id": vendor.lower(),
            "device_id": (read_attribute(os.path.join(link, "device")) or "").lower() or None,
            "class": pci_class.lower(),
            "subsystem_vendor_id": read_attribute(os.path.join(link, "subsystem_vendor")),
            "subsystem_device_id": read_attribute(os.path.join(link, "subsystem_device")),
            "numa_node": numa if numa is not None and numa >= 0 else None,
            "cpu_affinity": read_cpulist(link),
            "link_speed": read_attribute(os.path.join(link, "current_link_speed")),
            "link_width": width,
            "driver": driver,
            "host_bridge": host_bridge,
            # The first bridge below the host bridge is the root port; any
            # further bridges are switch ports (upstream/downstream pairs).
            "root_port": bridges[0]["bdf"] if bridges else None,
            "switches": [entry["bdf"] for entry in bridges[1:]],
            "pci_path": [entry["bdf"] for entry in bridges],
        })
    return gpus


def list_rdma_devices(sysfs_root):
    """Names under <root>/class/infiniband (mlx5_0, ...): the NICs NCCL's IB transport can use."""
    directory = os.path.join(sysfs_root, "class", "infiniband")
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def link_class(first, second):
    """Estimate nvidia-smi's link class for two GPUs from their PCI ancestry.

    nvidia-smi decides from the same tree: PIX when both hang off one bridge
    or one switch, PXB when they share a bridge further up, PHB when they share only the host
    bridge, NODE for different host bridges on one NUMA node and SYS across
    NUMA nodes. Without a NUMA node (a VM reports -1) two host bridges count
    as one node, which is what a guest with one virtual socket has.
    """
    if first["host_bridge"] is None or first["host_bridge"] != second["host_bridge"]:
        return "NODE" if first["numa_node"] == second["numa_node"] else "SYS"
    return bridge_link_class(first["pci_path"], second["pci_path"])
