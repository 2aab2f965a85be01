#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: pci_gpus
short_description: List NVIDIA GPUs on the PCI bus from sysfs
version_added: "0.1.0"
description:
  - Reads the kernel's PCI device list under O(sysfs_root) and returns every NVIDIA
    display or 3D controller (vendor C(0x10de), PCI class C(0x03xxxx)) with its bus id,
    device id, NUMA node, CPU list, link and the bridges above it.
  - "Needs no NVIDIA driver and no C(lspci): it works on a fresh host before the
    driver is installed, which is when a preflight needs to know the GPUs are there."
  - Zero GPUs is a result (RV(count=0)), not a failure; the caller decides whether that is an error.
  - Fails only when O(sysfs_root) cannot be read as a PCI tree.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  sysfs_root:
    description:
      - Folder that holds the sysfs tree, with C(bus/pci/devices) in it.
      - Point it at a copy of another host's C(/sys), or at the lab's simulated tree.
    type: path
    default: /sys
attributes:
  check_mode:
    description: Can run in check mode and return the same result.
    support: full
    details: Only reads files.
  diff_mode:
    description: Returns details on what has changed.
    support: none
notes:
  - C(numa_node) is null where the kernel reports C(-1), as in virtual machines without a virtual NUMA topology.
seealso:
  - module: inferops.serving.nccl_topology
'''

EXAMPLES = r'''
- name: Count the GPUs the VM was given
  inferops.serving.pci_gpus:
  register: __pci_gpus

- name: Stop when the VM has fewer GPUs than the inventory expects
  ansible.builtin.assert:
    that: __pci_gpus.count >= 8
    fail_msg: "The VM shows {{ __pci_gpus.count }} NVIDIA GPUs on its PCI bus; pass all eight through in the hypervisor."

- name: Read the lab's simulated PCI tree
  inferops.serving.pci_gpus:
    sysfs_root: /opt/inferops-lab/sys
'''

RETURN = r'''
count:
  description: Number of NVIDIA display/3D controllers found.
  returned: always
  type: int
  sample: 8
sysfs_root:
  description: The sysfs root that was read.
  returned: always
  type: str
  sample: /sys
gpus:
  description: One entry per GPU, sorted by PCI bus id.
  returned: always
  type: list
  elements: dict
  contains:
    bdf:
      description: PCI address, domain:bus:device.function with a 4-digit domain.
      type: str
      sample: "0000:01:00.0"
    vendor_id:
      description: PCI vendor id.
      type: str
      sample: "0x10de"
    device_id:
      description: PCI device id (identifies the GPU model).
      type: str
      sample: "0x2bb5"
    class:
      description: PCI class code; C(0x0300xx) VGA, C(0x0302xx) 3D controller.
      type: str
      sample: "0x030200"
    subsystem_vendor_id:
      description: PCI subsystem vendor id (the board maker), or null when sysfs lacks it.
      type: str
      sample: "0x10de"
    subsystem_device_id:
      description: PCI subsystem device id, or null when sysfs lacks it.
      type: str
      sample: "0x204e"
    numa_node:
      description: NUMA node of the device, null when the kernel reports none (-1).
      type: int
      sample: null
    cpu_affinity:
      description: CPUs local to the device (sysfs C(local_cpulist)).
      type: str
      sample: "0-63"
    link_speed:
      description: Current PCIe link speed as sysfs words it, or null.
      type: str
      sample: "32.0 GT/s PCIe"
    link_width:
      description: Current PCIe link width in lanes, or null.
      type: int
      sample: 16
    driver:
      description: Name of the kernel driver bound to the device (C(nvidia), C(vfio-pci), C(nouveau)), or null.
      type: str
      sample: nvidia
    host_bridge:
      description: The PCI host bridge (root bus) the device sits under, as sysfs names it.
      type: str
      sample: "pci0000:00"
    root_port:
      description: Bus id of the first bridge below the host bridge, or null when the GPU sits on the root bus.
      type: str
      sample: "0000:00:10.0"
    switches:
      description: Bus ids of the bridges between the root port and the GPU (PCIe switch ports), nearest the root first.
      type: list
      elements: str
      sample: []
    pci_path:
      description: Every bridge from the host bridge down to the GPU (root port first).
      type: list
      elements: str
      sample: ["0000:00:10.0"]
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._pci_sysfs import (
    PciSysfsError,
    list_gpus,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type='path', default='/sys'),
        ),
        supports_check_mode=True,
    )
    sysfs_root = module.params['sysfs_root']
    try:
        gpus = list_gpus(sysfs_root)
    except PciSysfsError as exc:
        module.fail_json(msg="Cannot read the PCI bus: %s. Set sysfs_root to a folder that holds "
                             "bus/pci/devices." % exc, sysfs_root=sysfs_root)
    module.exit_json(changed=False, gpus=gpus, count=len(gpus), sysfs_root=sysfs_root)


if __name__ == '__main__':
    main()
