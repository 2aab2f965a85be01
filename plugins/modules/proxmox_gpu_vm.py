#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: proxmox_gpu_vm
short_description: GPU passthrough of a Proxmox VE VM through C(qm), with a host preflight
version_added: 0.1.0
description:
  - Runs on the Proxmox VE host as root and talks to C(qm).
  - "Preflight, before anything is written: an IOMMU is present (C(/sys/class/iommu) populated),
    every GPU given by PCI address is on the bus and bound to C(vfio-pci), every other
    device of its IOMMU group is on C(vfio-pci) too (or a bridge), and the VM has no setting
    that adds C(kvm=off) (C(cpu: ...,hidden=1), C(x-vga=1) on a hostpci entry, C(kvm=off) in
    C(args)), which silently disables the GPU clique in the guest driver. Every problem
    found is reported in one failure, each saying what to change."
  - "Then the passthrough as data: C(machine: q35), C(cpu: host), one C(hostpciN) per GPU
    with an explicit function and C(pcie=1) (or a cluster resource C(mapping=)), optional
    C(numa) and C(hugepages), and the GPU clique as
    C(args: -set device.hostpciN.x-nv-gpudirect-clique=K) per GPU. The user's own C(args)
    and every other option stay as they are."
  - Compares against C(qm config) (pending values applied), so a rerun is a no-op; sets only
    what differs with one C(qm set).
  - A running VM keeps these options pending until its next start; the result says so
    (RV(restart_needed)). The module never restarts the VM.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  vmid:
    description: The VM's id.
    type: int
    required: true
  gpus:
    description:
      - GPUs in hostpci order, each C(host) (a PCI address with its function, C(0000:81:00.0))
        or C(mapping) (a cluster resource mapping name).
    type: list
    elements: dict
    required: true
  clique:
    description:
      - GPU clique id (0-15) given to every listed GPU, or null to remove their clique settings.
    type: int
  machine:
    description: Machine type; a pinned q35 version (C(pc-q35-9.2)) counts as C(q35).
    type: str
    default: q35
  cpu:
    description: CPU type.
    type: str
    default: host
  numa:
    description: Enable (true) or disable (false) NUMA emulation; null leaves it alone.
    type: bool
  hugepages:
    description: C(2), C(1024) or C(any); null leaves it alone.
    type: str
  sysfs_root:
    description: Folder holding the host's sysfs (a copy or the lab's simulated host).
    type: path
    default: /sys
  qm:
    description: The C(qm) command.
    type: path
    default: qm
attributes:
  check_mode:
    description: Reports what C(qm set) would change and whether a restart would be needed, without writing.
    support: full
  diff_mode:
    description: Shows the changed options before and after.
    support: full
notes:
  - Uses the C(qm) CLI as root rather than the HTTP API, because C(args) can only be set by
    C(root@pam) and the API then needs that user's password; C(qm) on the host needs neither.
seealso:
  - module: inferops.serving.nccl_allreduce_check
'''

EXAMPLES = r'''
- name: Pass two GPUs through as PCIe devices of one clique
  inferops.serving.proxmox_gpu_vm:
    vmid: 100
    gpus:
      - host: "0000:81:00.0"
      - host: "0000:c1:00.0"
    clique: 0
  register: __gpu_vm

- name: Remove the clique again
  inferops.serving.proxmox_gpu_vm:
    vmid: 100
    gpus: [{host: "0000:81:00.0"}, {host: "0000:c1:00.0"}]
    clique: null
'''

RETURN = r'''
changes:
  description: Options changed (or, in check mode, that would change), each with C(before) and C(after) (null when absent).
  returned: always
  type: dict
  sample: {"args": {"before": null, "after": "-set device.hostpci0.x-nv-gpudirect-clique=0"}}
qm_set:
  description: The C(qm set) command line run (or that would run), empty when nothing changes.
  returned: always
  type: list
  elements: str
running:
  description: The VM is running.
  returned: always
  type: bool
restart_needed:
  description: The VM runs with other values than its configuration holds; they take effect at its next start.
  returned: always
  type: bool
restart_keys:
  description: The options that differ between the running VM and its configuration.
  returned: always
  type: list
  elements: str
config:
  description: The VM's configuration after the change (pending values applied).
  returned: always
  type: dict
host:
  description: C(iommu_present) and, per GPU given by address, its driver, IOMMU group and members, and the bridges above it with their ACS state.
  returned: always
  type: dict
problems:
  description: What the preflight found; non-empty only on failure.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._proxmox_host import (
    acs_warnings,
    gpu_host_info,
    host_problems,
    iommu_present,
)
from ansible_collections.inferops.serving.plugins.module_utils._proxmox_qm import (
    ProxmoxConfigError,
    apply_changes,
    desired_changes,
    kvm_hiding,
    normalize_bdf,
    parse_qm_config,
    qm_set_argv,
    restart_needed,
    validate_spec,
)


def qm_run(module, argv):
    rc, out, err = module.run_command(argv, environ_update=dict(LC_ALL='C'))
    if rc != 0:
        module.fail_json(msg="`%s` failed (exit code %d): %s" % (" ".join(argv), rc, (err or out).strip()),
                         rc=rc, stdout=out, stderr=err)
    return out


def read_config(module, qm, vmid, current=False):
    argv = [qm, 'config', str(vmid)] + (['--current', '1'] if current else [])
    try:
        return parse_qm_config(qm_run(module, argv))
    except ProxmoxConfigError as exc:
        module.fail_json(msg="Cannot read `%s`: %s" % (" ".join(argv), exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vmid=dict(type='int', required=True),
            gpus=dict(type='list', elements='dict', required=True),
            clique=dict(type='int'),
            machine=dict(type='str', default='q35'),
            cpu=dict(type='str', default='host'),
            numa=dict(type='bool'),
            hugepages=dict(type='str'),
            sysfs_root=dict(type='path', default='/sys'),
            qm=dict(type='path', default='qm'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    vmid = params['vmid']
    spec = dict((key, params[key]) for key in ('gpus', 'clique', 'machine', 'cpu', 'numa', 'hugepages'))
    problems = validate_spec(spec)
    if problems:
        module.fail_json(msg="Settings for VM %d: %s" % (vmid, " ".join(problems)), problems=problems)

    qm = module.get_bin_path(params['qm'], required=True) if '/' not in params['qm'] else params['qm']
    options = read_config(module, qm, vmid)
    current = read_config(module, qm, vmid, current=True)
    status = qm_run(module, [qm, 'status', str(vmid)]).strip()
    running = status == 'status: running'

    iommu = iommu_present(params['sysfs_root'])
    gpus = [gpu_host_info(params['sysfs_root'], normalize_bdf(str(gpu['host'])))
            for gpu in spec['gpus'] if gpu.get('host')]
    host = dict(iommu_present=iommu, gpus=gpus)
    problems = host_problems(iommu, gpus, vmid)
    for key, value, change in kvm_hiding(options):
        problems.append("VM %d has '%s: %s', which makes QEMU add kvm=off; the NVIDIA guest driver then ignores "
                        "the GPU clique without a word: %s." % (vmid, key, value, change))
    if problems:
        module.fail_json(msg="Preflight for VM %d on this host failed, nothing was changed: %s"
                             % (vmid, " ".join(problems)), problems=problems, host=host)
    for warning in acs_warnings(gpus):
        module.warn(warning)

    want, delete = desired_changes(options, spec)
    after = apply_changes(options, want, delete)
    changes = dict((key, dict(before=options.get(key), after=after.get(key))) for key in list(want) + delete)
    argv = qm_set_argv(qm, vmid, want, delete) if changes else []
    if changes and not module.check_mode:
        qm_run(module, argv)
        written = read_config(module, qm, vmid)
        wrong = sorted(key for key in changes if written.get(key) != after.get(key))
        if wrong:
            module.fail_json(msg="`qm set` did not store %s for VM %d as asked" % (", ".join(wrong), vmid),
                             config=written)
        after = written
    keys = restart_needed(current, after) if running else []
    result = dict(changed=bool(changes), changes=changes, qm_set=argv, running=running,
                  restart_needed=bool(keys), restart_keys=keys, config=after, host=host, problems=[])
    if module._diff and changes:
        result['diff'] = dict(
            before="".join("%s: %s\n" % (k, options[k]) for k in sorted(changes) if k in options),
            after="".join("%s: %s\n" % (k, after[k]) for k in sorted(changes) if k in after),
            before_header="VM %d" % vmid, after_header="VM %d" % vmid)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
