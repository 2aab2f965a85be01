#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a PCI tree shaped like /sys of the target VM under ROOT.

Usage: make-sysfs.py ROOT [--gpus N]

The target is a Proxmox q35 guest: one host bridge (pci0000:00), the usual
chipset devices, a QEMU standard VGA and a virtio NIC, and every passed-through
GPU behind its own QEMU PCIe root port (1b36:000c) with its HDMI audio function
beside it. The guest has no virtual NUMA topology, so numa_node is -1 as the
kernel reports it in such a VM. Bus ids match the simulated nvidia-smi
(GPU i at 0000:<i+1>:00.0 behind root port 0000:00:<0x10+i>.0).

Layout, as the kernel has it:
  ROOT/devices/pci0000:00/<bdf>/...                    device directories
  ROOT/bus/pci/devices/<bdf> -> ../../../devices/...   one symlink per device
  ROOT/bus/pci/drivers/                                empty: no driver bound
With --gpus 0 the tree still holds the chipset, VGA and NIC devices.
"""

import argparse
import os
import shutil
import sys

GPU_DEVICE_ID = "0x2bb5"          # RTX PRO 6000 Blackwell Server Edition (GB202)
GPU_AUDIO_DEVICE_ID = "0x22e8"    # GB202 HDMI/DP audio function
GPU_SUBSYSTEM_DEVICE_ID = "0x204e"
CPU_LIST = "0-63"
CPU_MASK = "ffffffff,ffffffff"
# Root ports take slots 00:10.0 upwards; slot 00:1a holds the USB controller.
MAX_GPUS = 10

# Chipset and emulated devices of a q35 guest: (bdf, vendor, device, class).
PLATFORM_DEVICES = [
    ("0000:00:00.0", "0x8086", "0x29c0", "0x060000"),   # Q35 host bridge
    ("0000:00:01.0", "0x1234", "0x1111", "0x030000"),   # QEMU std VGA: a display controller that is no GPU
    ("0000:00:03.0", "0x1af4", "0x1000", "0x020000"),   # virtio network
    ("0000:00:1a.0", "0x8086", "0x2937", "0x0c0300"),   # USB UHCI
    ("0000:00:1f.0", "0x8086", "0x2918", "0x060100"),   # ISA bridge (LPC)
    ("0000:00:1f.2", "0x8086", "0x2922", "0x010601"),   # SATA AHCI
    ("0000:00:1f.3", "0x8086", "0x2930", "0x0c0500"),   # SMBus
]


def write(path, text):
    with open(path, "w") as handle:
        handle.write(text + "\n")


def make_device(directory, vendor, device, pci_class, subsystem_vendor=None, subsystem_device=None,
                link=None):
    os.makedirs(directory)
    write(os.path.join(directory, "vendor"), vendor)
    write(os.path.join(directory, "device"), device)
    write(os.path.join(directory, "class"), pci_class)
    write(os.path.join(directory, "subsystem_vendor"), subsystem_vendor or vendor)
    write(os.path.join(directory, "subsystem_device"), subsystem_device or "0x1100")
    write(os.path.join(directory, "numa_node"), "-1")
    write(os.path.join(directory, "local_cpulist"), CPU_LIST)
    write(os.path.join(directory, "local_cpus"), CPU_MASK)
    write(os.path.join(directory, "enable"), "1")
    if link:
        speed, width = link
        write(os.path.join(directory, "current_link_speed"), speed)
        write(os.path.join(directory, "current_link_width"), str(width))
        write(os.path.join(directory, "max_link_speed"), speed)
        write(os.path.join(directory, "max_link_width"), str(width))


def link_into_bus(root, device_dir, bdf):
    bus_dir = os.path.join(root, "bus", "pci", "devices")
    target = os.path.relpath(device_dir, bus_dir)
    os.symlink(target, os.path.join(bus_dir, bdf))


def build(root, gpu_count):
    for sub in ("devices", "bus"):
        path = os.path.join(root, sub)
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)
    host_bridge = os.path.join(root, "devices", "pci0000:00")
    os.makedirs(host_bridge)
    os.makedirs(os.path.join(root, "bus", "pci", "devices"))
    os.makedirs(os.path.join(root, "bus", "pci", "drivers"))

    for bdf, vendor, device, pci_class in PLATFORM_DEVICES:
        directory = os.path.join(host_bridge, bdf)
        make_device(directory, vendor, device, pci_class, subsystem_vendor="0x1af4")
        link_into_bus(root, directory, bdf)

    for index in range(gpu_count):
        bus = index + 1
        port_bdf = "0000:00:%02x.0" % (0x10 + index)
        port_dir = os.path.join(host_bridge, port_bdf)
        # The root port reports the guest's emulated link, not the physical one.
        make_device(port_dir, "0x1b36", "0x000c", "0x060400", subsystem_vendor="0x1b36",
                    subsystem_device="0x0000", link=("16.0 GT/s PCIe", 16))
        write(os.path.join(port_dir, "secondary_bus_number"), str(bus))
        link_into_bus(root, port_dir, port_bdf)

        gpu_bdf = "0000:%02x:00.0" % bus
        gpu_dir = os.path.join(port_dir, gpu_bdf)
        make_device(gpu_dir, "0x10de", GPU_DEVICE_ID, "0x030200", subsystem_vendor="0x10de",
                    subsystem_device=GPU_SUBSYSTEM_DEVICE_ID, link=("32.0 GT/s PCIe", 16))
        link_into_bus(root, gpu_dir, gpu_bdf)

        audio_bdf = "0000:%02x:00.1" % bus
        audio_dir = os.path.join(port_dir, audio_bdf)
        make_device(audio_dir, "0x10de", GPU_AUDIO_DEVICE_ID, "0x040300", subsystem_vendor="0x10de",
                    subsystem_device=GPU_SUBSYSTEM_DEVICE_ID, link=("32.0 GT/s PCIe", 16))
        link_into_bus(root, audio_dir, audio_bdf)


def main(argv):
    parser = argparse.ArgumentParser(description="Write a simulated /sys PCI tree of the GPU VM.")
    parser.add_argument("root", help="folder that plays the part of /sys")
    parser.add_argument("--gpus", type=int, default=8,
                        help="number of GPUs, each behind its own root port (0-%d)" % MAX_GPUS)
    args = parser.parse_args(argv)
    if not 0 <= args.gpus <= MAX_GPUS:
        parser.error("--gpus must be between 0 and %d (root ports sit in slots 00:10 to 00:19)" % MAX_GPUS)
    build(os.path.abspath(args.root), args.gpus)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
