# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a Proxmox host's sysfs says about GPUs to pass through, and what stands in the way.

Reads only files: /sys/class/iommu (populated when an IOMMU is active), each device's
`driver` and `iommu_group` links, /sys/kernel/iommu_groups/<n>/devices, and the PCI
configuration space of the bridges above each GPU (`config`), whose ACS extended
capability (ID 0x000d) holds the same ACSCtl bits `lspci -vvv` prints. Reading past
the first 256 bytes of `config` needs root, as on the real host.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import struct

from ansible_collections.inferops.serving.plugins.module_utils._pci_sysfs import (
    BRIDGE_CLASS_PREFIX,
    read_attribute as _read,
)

ACS_CAP_ID = 0x000D
EXT_CAP_START = 0x100
# ACS control bits, in lspci's words (lib/header.h PCI_ACS_*).
ACS_BITS = (("SrcValid", 0x01), ("TransBlk", 0x02), ("ReqRedir", 0x04), ("CmpltRedir", 0x08),
            ("UpstreamFwd", 0x10), ("EgressCtrl", 0x20), ("DirectTrans", 0x40))
VFIO_OK_DRIVERS = (None, "vfio-pci", "pci-stub")


def parse_acs(config):
    """ACS capability and control bits from a PCI config space dump, or None without ACS."""
    if len(config) <= EXT_CAP_START:
        return None
    offset = EXT_CAP_START
    seen = set()
    while offset and offset not in seen and offset + 8 <= len(config):
        seen.add(offset)
        header = struct.unpack_from("<I", config, offset)[0]
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            cap, ctl = struct.unpack_from("<HH", config, offset + 4)
            return {
                "offset": offset,
                "capabilities": {name: bool(cap & bit) for name, bit in ACS_BITS},
                "control": {name: bool(ctl & bit) for name, bit in ACS_BITS},
                "redirects_p2p": bool(ctl & 0x04) or bool(ctl & 0x08),
            }
        offset = (header >> 20) & 0xFFC
    return None


def _link_name(path):
    return os.path.basename(os.readlink(path)) if os.path.islink(path) else None


def device(sysfs_root, bdf):
    path = os.path.join(sysfs_root, "bus", "pci", "devices", bdf)
    if not os.path.exists(path):
        return None
    pci_class = _read(os.path.join(path, "class"))
    return {
        "bdf": bdf,
        "vendor": _read(os.path.join(path, "vendor")),
        "device": _read(os.path.join(path, "device")),
        "class": pci_class,
        "is_bridge": bool(pci_class and pci_class.startswith(BRIDGE_CLASS_PREFIX)),
        "driver": _link_name(os.path.join(path, "driver")),
        "iommu_group": _link_name(os.path.join(path, "iommu_group")),
        "path": os.path.realpath(path),
    }


def iommu_present(sysfs_root):
    try:
        return bool(os.listdir(os.path.join(sysfs_root, "class", "iommu")))
    except OSError:
        return False


def gpu_host_info(sysfs_root, bdf):
    """A GPU's driver, IOMMU group with every member, and the bridges above it with their ACS state."""
    info = device(sysfs_root, bdf)
    if info is None:
        return {"bdf": bdf, "present": False}
    info["present"] = True
    members = []
    if info["iommu_group"] is not None:
        group_dir = os.path.join(sysfs_root, "kernel", "iommu_groups", info["iommu_group"], "devices")
        for name in sorted(os.listdir(group_dir)) if os.path.isdir(group_dir) else []:
            member = device(sysfs_root, name)
            if member:
                members.append({k: member[k] for k in ("bdf", "vendor", "class", "is_bridge", "driver")})
    info["group_members"] = members
    ports = []
    parent = os.path.dirname(info["path"])
    while os.path.basename(parent).count(":") == 2:
        name = os.path.basename(parent)
        config = b""
        try:
            with open(os.path.join(parent, "config"), "rb") as handle:
                config = handle.read()
        except (IOError, OSError):
            pass
        acs = parse_acs(config)
        ports.insert(0, {"bdf": name, "acs": acs, "config_bytes": len(config)})
        parent = os.path.dirname(parent)
    info["ports"] = ports
    del info["path"]
    return info


def host_problems(iommu, gpus, vmid):
    """Failures that stop the role before it writes anything, each saying what to change."""
    problems = []
    if not iommu:
        problems.append("IOMMU not present: /sys/class/iommu is empty, so no device can be passed through. "
                        "Enable VT-d (Intel) or AMD-Vi/IOMMU (AMD) in the firmware, add intel_iommu=on iommu=pt "
                        "(Intel) or iommu=pt (AMD) to the kernel command line (/etc/kernel/cmdline with "
                        "proxmox-boot-tool refresh, or GRUB_CMDLINE_LINUX_DEFAULT with update-grub) and reboot "
                        "the host.")
    passed = set(gpu["bdf"] for gpu in gpus)
    for gpu in gpus:
        if not gpu.get("present"):
            problems.append("GPU %s (for VM %s) is not on this host's PCI bus: check proxmox_gpu_vm_gpus against "
                            "`lspci -D -d 10de:`." % (gpu["bdf"], vmid))
            continue
        if gpu["driver"] != "vfio-pci":
            ids = "%s:%s" % ((gpu["vendor"] or "0x10de")[2:], (gpu["device"] or "0x????")[2:])
            problems.append("GPU %s is bound to %s, not vfio-pci: add 'options vfio-pci ids=%s' and "
                            "'softdep nvidia pre: vfio-pci' to /etc/modprobe.d/vfio.conf, load vfio, "
                            "vfio_iommu_type1 and vfio_pci at boot (/etc/modules), run update-initramfs -u -k all "
                            "and reboot the host." % (gpu["bdf"], gpu["driver"] or "no driver", ids))
        if iommu and gpu["iommu_group"] is None:
            problems.append("GPU %s has no IOMMU group: the IOMMU is not active for it; check the kernel command "
                            "line and the firmware setting." % gpu["bdf"])
        others = [m for m in gpu.get("group_members", [])
                  if m["bdf"] not in passed and not m["is_bridge"] and m["driver"] not in VFIO_OK_DRIVERS]
        for member in others:
            problems.append("IOMMU group %s of GPU %s also holds %s (driver %s): vfio needs every device of the "
                            "group on vfio-pci; bind %s to vfio-pci too (its id in 'options vfio-pci ids=...'), or "
                            "move the GPU to a slot with an IOMMU group of its own."
                            % (gpu["iommu_group"], gpu["bdf"], member["bdf"], member["driver"], member["bdf"]))
    return problems


def acs_warnings(gpus):
    """Ports above the GPUs whose ACS redirects peer traffic up to the root complex."""
    warnings = []
    for gpu in gpus:
        for port in gpu.get("ports", []):
            acs = port.get("acs")
            if acs and acs["redirects_p2p"]:
                on = [name for name, value in acs["control"].items() if value]
                warnings.append("ACS on %s above GPU %s redirects peer-to-peer requests to the root complex "
                                "(ACSCtl %s): P2P between GPUs under this port goes through the CPU's root "
                                "complex, and the verified all-reduce decides whether it works."
                                % (port["bdf"], gpu["bdf"], " ".join(name + "+" for name in on)))
    return warnings
