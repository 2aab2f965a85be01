#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a sysfs tree shaped like a Proxmox VE host's /sys with GPUs for passthrough.

Usage: make-host-sysfs.py ROOT [--gpus N] [--no-iommu] [--gpu-driver D] [--audio-driver D]
                               [--no-acs]

Bare metal, as the kernel shows it: each GPU (RTX PRO 6000 Blackwell, 10de:2bb5) and
its HDMI audio function (10de:22e8) behind a root port of its own under host bridge
pci0000:80 (GPU i at 0000:<0x81+i>:00.0, port 0000:80:<1+i>.1). With an IOMMU each
GPU and its audio function share IOMMU group i+10 and each root port has a group of
its own; /sys/class/iommu holds one unit. Each root port's `config` is a 4 KiB PCI
Express config space whose extended capability list holds AER at 0x100 and ACS at
0x148, with the ACSCtl bits Linux sets when the IOMMU is on (SrcValid ReqRedir
CmpltRedir UpstreamFwd); --no-acs leaves them off. `driver` links name the bound
driver (vfio-pci by default) as the kernel does.
"""

import argparse
import os
import shutil
import struct
import sys

GPU = ("0x10de", "0x2bb5", "0x030200")
AUDIO = ("0x10de", "0x22e8", "0x040300")
PORT = ("0x1022", "0x1483", "0x060400")   # AMD EPYC PCIe GPP bridge
HOST_BRIDGE = "pci0000:80"
ACS_CTL_IOMMU = 0x01 | 0x04 | 0x08 | 0x10


def write(path, text):
    with open(path, "w") as handle:
        handle.write(text + "\n")


def port_config(vendor, device, acs_ctl):
    config = bytearray(4096)
    struct.pack_into("<HH", config, 0, int(vendor, 16), int(device, 16))
    config[0x0B] = 0x06
    config[0x0A] = 0x04
    # AER (id 1, version 2) at 0x100 pointing to ACS at 0x148 (id 0x000d, version 1, last).
    struct.pack_into("<I", config, 0x100, 0x0001 | (2 << 16) | (0x148 << 20))
    struct.pack_into("<I", config, 0x148, 0x000D | (1 << 16))
    struct.pack_into("<HH", config, 0x14C, 0x005F, acs_ctl)
    return bytes(config)


def make_device(root, directory, bdf, ids, driver, group):
    os.makedirs(directory)
    vendor, device, pci_class = ids
    write(os.path.join(directory, "vendor"), vendor)
    write(os.path.join(directory, "device"), device)
    write(os.path.join(directory, "class"), pci_class)
    write(os.path.join(directory, "numa_node"), "1")
    bus_dir = os.path.join(root, "bus", "pci", "devices")
    os.symlink(os.path.relpath(directory, bus_dir), os.path.join(bus_dir, bdf))
    if driver:
        driver_dir = os.path.join(root, "bus", "pci", "drivers", driver)
        os.makedirs(driver_dir, exist_ok=True)
        os.symlink(os.path.relpath(driver_dir, directory), os.path.join(directory, "driver"))
    if group is not None:
        group_dir = os.path.join(root, "kernel", "iommu_groups", str(group), "devices")
        os.makedirs(group_dir, exist_ok=True)
        os.symlink(os.path.relpath(directory, group_dir), os.path.join(group_dir, bdf))
        os.symlink(os.path.relpath(os.path.dirname(group_dir), directory), os.path.join(directory, "iommu_group"))


def build(root, gpus, iommu, gpu_driver, audio_driver, acs):
    for sub in ("devices", "bus", "kernel", "class"):
        shutil.rmtree(os.path.join(root, sub), ignore_errors=True)
    os.makedirs(os.path.join(root, "bus", "pci", "devices"))
    os.makedirs(os.path.join(root, "bus", "pci", "drivers"))
    os.makedirs(os.path.join(root, "class", "iommu"))
    if iommu:
        os.makedirs(os.path.join(root, "class", "iommu", "ivhd0"))
    bridge = os.path.join(root, "devices", HOST_BRIDGE)
    os.makedirs(bridge)
    for index in range(gpus):
        bus = 0x81 + index
        port_bdf = "0000:80:%02x.1" % (1 + index)
        port_dir = os.path.join(bridge, port_bdf)
        make_device(root, port_dir, port_bdf, PORT, "pcieport", index if iommu else None)
        with open(os.path.join(port_dir, "config"), "wb") as handle:
            handle.write(port_config(PORT[0], PORT[1], ACS_CTL_IOMMU if (acs and iommu) else 0))
        for function, ids, driver in ((0, GPU, gpu_driver), (1, AUDIO, audio_driver)):
            bdf = "0000:%02x:00.%d" % (bus, function)
            make_device(root, os.path.join(port_dir, bdf), bdf, ids, driver, 10 + index if iommu else None)


def main(argv):
    parser = argparse.ArgumentParser(description="Write a simulated Proxmox host /sys with GPUs.")
    parser.add_argument("root")
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--no-iommu", action="store_true", help="firmware or kernel without an active IOMMU")
    parser.add_argument("--gpu-driver", default="vfio-pci", help="driver bound to the GPUs ('' for none)")
    parser.add_argument("--audio-driver", default="vfio-pci", help="driver bound to the audio functions")
    parser.add_argument("--no-acs", action="store_true", help="ACS control bits off on the root ports")
    args = parser.parse_args(argv)
    build(os.path.abspath(args.root), args.gpus, not args.no_iommu, args.gpu_driver or None,
          args.audio_driver or None, not args.no_acs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
