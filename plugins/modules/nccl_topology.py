#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: nccl_topology
short_description: Read the GPU interconnect and say what it allows for NCCL and SGLang
version_added: "0.1.0"
description:
  - Reads how the node's GPUs are connected (NVLink, PCIe switch, root port, host bridge,
    NUMA node) and whether the driver allows peer-to-peer (P2P) transfers between them,
    and returns it as facts in C(ansible_facts.nccl_topology).
  - From that it derives NCCL environment variables and SGLang server flags, and whether
    FlashInfer's allreduce fusion can help on this hardware, each with a readable reason.
  - "Inputs, each optional; the facts say which were used (RV(ansible_facts.nccl_topology.sources)):
    C(nvidia-smi topo -m), C(nvidia-smi topo -p2p r) and C(-p2p w),
    C(nvidia-smi --query-gpu=index,name,pci.bus_id,compute_cap,memory.total,power.limit --format=csv),
    an NCCL topology XML (O(nccl_xml_file)), and the PCI tree under O(sysfs_root)."
  - The PCI tree needs no driver, so the module also works before the NVIDIA driver is installed;
    links are then estimated from the PCI tree and P2P is unknown.
  - With any of the C(*_file) options set, saved outputs are read instead of running commands
    (offline analysis of another host's support bundle).
  - Only reads; never changes the node.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  topo_matrix_file:
    description:
      - Saved output of C(nvidia-smi topo -m) (or C(-mp)) to read instead of running it.
      - Tabs or spaces, indentation, ANSI codes, a shell prompt glued to the header and cut legends are tolerated.
    type: path
  p2p_read_file:
    description: Saved output of C(nvidia-smi topo -p2p r).
    type: path
  p2p_write_file:
    description: Saved output of C(nvidia-smi topo -p2p w).
    type: path
  query_gpu_file:
    description:
      - Saved output of C(nvidia-smi --query-gpu=... --format=csv).
      - With a header line the fields may come in any order, with or without units.
        Without a header line the fields must be C(index,name,pci.bus_id,compute_cap,memory.total,power.limit).
    type: path
  nccl_xml_file:
    description:
      - NCCL topology XML, as NCCL writes it with C(NCCL_TOPO_DUMP_FILE=path).
      - A cut or damaged file is read up to the damage, with a warning.
    type: path
  sysfs_root:
    description:
      - Folder holding the PCI tree (C(bus/pci/devices)), normally C(/sys).
      - When not set, C(/sys) is read if commands run (O(run_commands)) and skipped otherwise,
        so that an offline analysis never mixes in the PCI tree of the host running it.
    type: path
  run_commands:
    description:
      - Run C(nvidia-smi) on the node.
      - Defaults to V(true) when none of the C(*_file) options is set, V(false) otherwise.
    type: bool
  nvidia_smi:
    description: Name or path of the nvidia-smi program.
    type: str
    default: nvidia-smi
  timeout:
    description:
      - Seconds to wait for each C(nvidia-smi) call (they run at once) before giving up on it.
      - One that does not answer fails the module, saying so, instead of waiting on a stuck driver; one
        stuck in the driver, which survives being killed, is left behind.
    type: int
    default: 60
  tp_size:
    description:
      - Tensor parallel size the server will run with. Defaults to the number of GPUs.
      - Allreduce fusion is only advised for a size above 1.
    type: int
  flashinfer_version:
    description:
      - FlashInfer version that will run. From 0.6.17 FlashInfer builds its TRT-LLM allreduce kernels
        for SM12x; older versions (the pinned 0.6.3) only for SM90 and SM100.
      - When not set, SM12x counts as unsupported.
    type: str
  sglang_venv:
    description:
      - Virtual environment of the SGLang that will run. Its server options are read (as
        M(inferops.serving.sglang_server_args) reads them, without importing SGLang) so that the
        allreduce-fusion verdict names the switch this release understands
        (C(--enforce-disable-flashinfer-allreduce-fusion) from SGLang 0.5.23 on).
      - When not set or unreadable, the verdict names no switch.
    type: path
attributes:
  check_mode:
    description: Can run in check mode and return the same result.
    support: full
    details: Only reads; the result is the same in check mode.
  diff_mode:
    description: Returns details on what has changed.
    support: none
  facts:
    description: Action returns an C(ansible_facts) dictionary that updates existing host facts.
    support: full
notes:
  - "The advice rules: C(NCCL_IB_DISABLE=1) when the NIC list is known and has no InfiniBand/RoCE
    device; C(NCCL_P2P_LEVEL=SYS) when every pair reports P2P OK but the links cross the host bridge
    (NCCL stops at PXB by default on Intel and ARM hosts); no P2P variable where P2P is missing,
    because NCCL checks each pair itself; C(disable-custom-all-reduce) where some pair lacks P2P,
    because SGLang's custom allreduce needs CUDA IPC between all GPUs and SGLang does not check by
    default; allreduce fusion only with P2P on every pair, a tensor parallel size above 1 and SM90,
    SM100 (or SM12x from FlashInfer 0.6.17)."
  - Bus ids are returned as C(0000:01:00.0) (4-digit domain, lower case), the form sysfs and NCCL use.
seealso:
  - module: inferops.serving.pci_gpus
'''

EXAMPLES = r'''
- name: Read the GPU topology of the node
  inferops.serving.nccl_topology:
    tp_size: 8

- name: Say what the hardware allows
  ansible.builtin.debug:
    msg: "{{ ansible_facts['nccl_topology']['reasons'] }}"

- name: Stop an allreduce-fusion experiment on hardware that cannot profit from it
  ansible.builtin.assert:
    that: ansible_facts['nccl_topology']['allreduce_fusion_advised']
    fail_msg: "{{ ansible_facts['nccl_topology']['reasons'] | join('; ') }}"
  when: sglang_sm120_allreduce_fusion_patch | bool

- name: Analyse a support bundle from another host, on the controller
  inferops.serving.nccl_topology:
    topo_matrix_file: bundle/topo-m.txt
    p2p_read_file: bundle/topo-p2p-r.txt
    query_gpu_file: bundle/query-gpu.csv
  delegate_to: localhost

- name: Read the lab node's simulated PCI tree next to the simulated nvidia-smi
  inferops.serving.nccl_topology:
    sysfs_root: /opt/inferops-lab/sys
'''

RETURN = r'''
ansible_facts:
  description: Facts added under C(nccl_topology).
  returned: always
  type: dict
  contains:
    nccl_topology:
      description: What the node's GPU interconnect is and what follows from it.
      returned: always
      type: dict
      contains:
        gpu_count:
          description: Number of GPUs (from query-gpu, else the matrix, else the NCCL XML, else sysfs).
          type: int
          sample: 8
        gpus:
          description: One entry per GPU in nvidia-smi index order; a value no input gave is null.
          type: list
          elements: dict
          contains:
            index:
              description: nvidia-smi index.
              type: int
            name:
              description: Product name.
              type: str
              sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
            pci_bus_id:
              description: PCI bus id, 4-digit domain, lower case.
              type: str
              sample: "0000:01:00.0"
            compute_capability:
              description: Compute capability as major.minor.
              type: str
              sample: "12.0"
            sm:
              description: Compute capability as one number (major * 10 + minor).
              type: int
              sample: 120
            memory_mib:
              description: Total memory in MiB.
              type: int
              sample: 97887
            power_limit_w:
              description: Power limit in watts.
              type: float
              sample: 600.0
            numa_node:
              description: NUMA node the GPU is attached to, null when unknown or none (VMs).
              type: int
              sample: null
            cpu_affinity:
              description: CPUs close to the GPU, as a CPU list.
              type: str
              sample: "0-63"
        gpu_links:
          description:
            - N x N link classes, C(X) on the diagonal, else as nvidia-smi prints them
              (C(SYS), C(NODE), C(PHB), C(PXB), C(PIX), C(NV<n>)).
            - C(UNKNOWN) where no input gave the link.
          type: list
          elements: list
          sample: [["X", "PHB"], ["PHB", "X"]]
        links_from:
          description: Input the links came from (C(topology matrix), C(NCCL XML), C(sysfs)), or null.
          type: str
          sample: topology matrix
        nic_names:
          description:
            - Network devices in matrix order, C(NIC<n>) resolved through the NIC legend.
            - Null when no input lists NICs; an empty list when the input lists none.
          type: list
          elements: str
          sample: ["mlx5_0", "mlx5_1"]
        p2p_read:
          description: N x N P2P read status (C(X), C(OK), C(NS), C(CNS), C(GNS), C(TNS), C(DR), C(U)), or null when not read.
          type: list
          elements: list
          sample: [["X", "NS"], ["NS", "X"]]
        p2p_write:
          description: N x N P2P write status, or null when not read.
          type: list
          elements: list
          sample: [["X", "NS"], ["NS", "X"]]
        nvlink:
          description: Whether any GPU pair is joined by NVLink.
          type: bool
          sample: false
        weakest_link:
          description: Weakest link class over all GPU pairs; null for one GPU or when a link is unknown.
          type: str
          sample: PHB
        all_pairs_p2p:
          description:
            - Whether every GPU pair allows P2P (read and write where both were read).
            - True without P2P matrices only when every pair is NVLink; null when unknown or for one GPU.
          type: bool
          sample: false
        tp_size:
          description: Tensor parallel size the advice assumes.
          type: int
          sample: 8
        sources:
          description:
            - Which input was used for each kind, with the command or file it came from; null where unused.
            - "Keys: C(topo_matrix), C(p2p_read), C(p2p_write), C(query_gpu), C(nccl_xml), C(sysfs)."
          type: dict
          sample: {"topo_matrix": "nvidia-smi topo -m", "p2p_read": "nvidia-smi topo -p2p r", "sysfs": null}
        warnings:
          description: Anything odd in the inputs that was tolerated, in words.
          type: list
          elements: str
          sample: ["topology matrix: ignored text before the header: 'nvidia-smi topo -m'"]
        recommended_env:
          description: NCCL environment variables the topology calls for (name to string value).
          type: dict
          sample: {"NCCL_IB_DISABLE": "1"}
        recommended_sglang_args:
          description: SGLang server flags the topology calls for (flag without dashes to value; true is a bare flag).
          type: dict
          sample: {"disable-custom-all-reduce": true}
        allreduce_fusion_advised:
          description: Whether FlashInfer's allreduce fusion can help on this hardware.
          type: bool
          sample: false
        allreduce_fusion_flags:
          description:
            - The installed SGLang's switches for the fusion (O(sglang_venv)), null when not read.
            - C(on) turns it on (C(--flashinfer-allreduce-fusion-backend) from 0.5.23, before that
              C(--enable-flashinfer-allreduce-fusion)); C(off) keeps it off whatever the model's defaults
              (C(--enforce-disable-flashinfer-allreduce-fusion), null where the release has none).
          type: dict
          sample: {"on": "--enable-flashinfer-allreduce-fusion", "off": null}
        reasons:
          description: The reasoning behind the advice, one sentence each.
          type: list
          elements: str
          sample: ["allreduce fusion not advised: FlashInfer's TRT-LLM allreduce fusion ... needs P2P on every pair; P2P is missing here"]
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.inferops.serving.plugins.module_utils._commands import (
    NVIDIA_SMI_DIRS,
    NVIDIA_SMI_STUCK,
    NVIDIA_SMI_TIMEOUT,
    CommandTimeout,
    find_nvidia_smi,
    run_c,
    run_c_together,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import SglangSourceError
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.installed_options import installed_option_strings
from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    QUERY_GPU_FIELDS,
    TopologyError,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.matrix import (
    parse_topo_matrix,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.merge import (
    build_facts,
    sysfs_links,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.p2p import (
    parse_p2p_matrix,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.query_gpu import (
    parse_query_gpu,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.nccl_xml import (
    parse_nccl_xml,
)
from ansible_collections.inferops.serving.plugins.module_utils._pci_sysfs import (
    PciSysfsError,
    link_class,
    list_gpus,
    list_rdma_devices,
)

FILE_OPTIONS = ('topo_matrix_file', 'p2p_read_file', 'p2p_write_file', 'query_gpu_file', 'nccl_xml_file')


def read_file(module, option):
    path = module.params[option]
    try:
        with open(path, 'rb') as handle:
            return to_native(handle.read(), errors='surrogate_or_strict')
    except (IOError, OSError, UnicodeError) as exc:
        module.fail_json(msg="Cannot read %s %s: %s" % (option, path, to_native(exc)))


def parse_or_fail(module, parser, text, origin, rc=None):
    try:
        return parser(text)
    except TopologyError as exc:
        module.fail_json(msg="Cannot read %s: %s" % (origin, to_native(exc)), stdout=text, rc=rc)


def sysfs_summary(sysfs_gpus):
    return [dict((key, gpu[key]) for key in ('bdf', 'device_id', 'numa_node', 'driver')) for gpu in sysfs_gpus or []]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topo_matrix_file=dict(type='path'),
            p2p_read_file=dict(type='path'),
            p2p_write_file=dict(type='path'),
            query_gpu_file=dict(type='path'),
            nccl_xml_file=dict(type='path'),
            sysfs_root=dict(type='path'),
            run_commands=dict(type='bool'),
            nvidia_smi=dict(type='str', default='nvidia-smi'),
            timeout=dict(type='int', default=NVIDIA_SMI_TIMEOUT),
            tp_size=dict(type='int'),
            flashinfer_version=dict(type='str'),
            sglang_venv=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    files_given = [option for option in FILE_OPTIONS if params[option]]
    run_commands = params['run_commands'] if params['run_commands'] is not None else not files_given
    if params['tp_size'] is not None and params['tp_size'] < 1:
        module.fail_json(msg="tp_size must be 1 or more, got %d" % params['tp_size'])
    if params['timeout'] < 1:
        module.fail_json(msg="timeout must be 1 or more seconds, got %d" % params['timeout'])

    sources = dict((key, None) for key in ('topo_matrix', 'p2p_read', 'p2p_write', 'query_gpu', 'nccl_xml', 'sysfs'))
    warnings = []
    parsed = dict((key, None) for key in ('topo', 'p2p_read', 'p2p_write', 'query', 'xml'))

    # The PCI tree first: it is the only input that exists before the driver does.
    sysfs_root = params['sysfs_root'] or ('/sys' if run_commands else None)
    sysfs_gpus = None
    rdma_devices = None
    if sysfs_root:
        try:
            sysfs_gpus = list_gpus(sysfs_root)
            rdma_devices = list_rdma_devices(sysfs_root)
            sources['sysfs'] = sysfs_root
        except PciSysfsError as exc:
            if params['sysfs_root']:
                module.fail_json(msg="Cannot read sysfs_root: %s" % to_native(exc))
            warnings.append("PCI tree not read: %s" % to_native(exc))

    file_inputs = (
        ('topo_matrix_file', 'topo', 'topo_matrix', parse_topo_matrix),
        ('p2p_read_file', 'p2p_read', 'p2p_read', parse_p2p_matrix),
        ('p2p_write_file', 'p2p_write', 'p2p_write', parse_p2p_matrix),
        ('query_gpu_file', 'query', 'query_gpu', parse_query_gpu),
        ('nccl_xml_file', 'xml', 'nccl_xml', parse_nccl_xml),
    )
    for option, key, source, parser in file_inputs:
        if params[option]:
            text = read_file(module, option)
            parsed[key] = parse_or_fail(module, parser, text, "%s %s" % (option, params[option]))
            sources[source] = params[option]

    if run_commands:
        smi = params['nvidia_smi']
        if os.path.sep in smi:
            smi_path = smi if os.access(smi, os.X_OK) else None
        else:
            smi_path = find_nvidia_smi(module, smi)
        if smi_path is None:
            if not sysfs_gpus and not any(parsed.values()):
                module.fail_json(
                    msg="No NVIDIA GPU found: %s is not on PATH or in %s, and %s has no NVIDIA display or 3D "
                        "controller (vendor 0x10de, class 0x03xxxx) under bus/pci/devices"
                        % (smi, ", ".join(NVIDIA_SMI_DIRS), sysfs_root or "no PCI tree"),
                    sources=sources)
            warnings.append("%s not found (driver not installed?): links estimated from the PCI tree, "
                            "P2P unknown" % smi)
        else:
            try:
                run_nvidia_smi(module, smi_path, parsed, sources, warnings, sysfs_gpus)
            except CommandTimeout as exc:
                module.fail_json(msg="%s. %s" % (exc, NVIDIA_SMI_STUCK), cmd=exc.argv, nvidia_smi_timeout=True,
                                 sysfs_gpus=sysfs_summary(sysfs_gpus))

    if not any(parsed.values()) and not sysfs_gpus:
        module.fail_json(msg="No input describes a GPU: %s" % (
            "the PCI tree at %s has no NVIDIA GPU" % sysfs_root if sysfs_root else "give a *_file option or sysfs_root"),
            sources=sources)

    links_estimate = sysfs_links(sysfs_gpus, link_class) if sysfs_gpus else None
    sysfs_for_merge = None
    if sysfs_gpus is not None:
        sysfs_for_merge = [dict(pci_bus_id=gpu['bdf'], numa_node=gpu['numa_node'], cpu_affinity=gpu['cpu_affinity'])
                           for gpu in sysfs_gpus]
    facts = build_facts(
        topo=parsed['topo'], p2p_read=parsed['p2p_read'], p2p_write=parsed['p2p_write'], query=parsed['query'],
        xml=parsed['xml'], sysfs_gpus=sysfs_for_merge, sysfs_links_matrix=links_estimate,
        rdma_devices=rdma_devices, sources=sources, tp_size=params['tp_size'],
        flashinfer_version=params['flashinfer_version'], warnings=warnings,
        server_flags=read_server_flags(params['sglang_venv'], warnings))
    module.exit_json(changed=False, ansible_facts=dict(nccl_topology=facts))


def read_server_flags(venv_path, warnings):
    if not venv_path:
        return None
    try:
        return installed_option_strings(venv_path)
    except (SglangSourceError, IOError, OSError) as exc:
        warnings.append('the SGLang options in %s were not read (%s): the fusion verdict names no switch'
                        % (venv_path, exc))
        return None


def run_query(module, smi_path, parsed, sources, warnings, sysfs_gpus, first_answer=None):
    fields = list(QUERY_GPU_FIELDS)
    query_cmd = [smi_path, '--query-gpu=%s' % ','.join(fields), '--format=csv']
    rc, out, err = first_answer or run_c(module, query_cmd, timeout=module.params['timeout'])
    if rc != 0 and 'compute_cap' in (out + err):
        # Drivers before R510 do not know compute_cap; the rest is still worth having.
        fields.remove('compute_cap')
        query_cmd = [smi_path, '--query-gpu=%s' % ','.join(fields), '--format=csv']
        rc, out, err = run_c(module, query_cmd, timeout=module.params['timeout'])
        warnings.append("nvidia-smi does not know compute_cap (driver older than R510); compute capability unknown")
    if rc != 0:
        hint = ''
        if sysfs_gpus:
            # The card is on the bus but the driver does not answer: typically a driver
            # installed without the reboot that loads it, or a kernel module that failed.
            hint = (" The PCI bus shows %d NVIDIA GPU(s) (bound driver: %s); load the NVIDIA driver "
                    "(reboot after installing it) and run again."
                    % (len(sysfs_gpus), ', '.join(sorted(set(gpu['driver'] or 'none' for gpu in sysfs_gpus)))))
        said = ((err or out).strip() or 'no output').rstrip('.')
        module.fail_json(
            msg="%s failed with rc %d: %s.%s" % (' '.join(query_cmd), rc, said, hint),
            rc=rc, stdout=out, stderr=err, cmd=query_cmd, sysfs_gpus=sysfs_summary(sysfs_gpus))
    parsed['query'] = parse_or_fail(module, parse_query_gpu, out, ' '.join(query_cmd[1:]), rc)
    sources['query_gpu'] = 'nvidia-smi ' + ' '.join(query_cmd[1:])


TOPO_CALLS = (
    (['topo', '-m'], 'topo', 'topo_matrix', parse_topo_matrix),
    (['topo', '-p2p', 'r'], 'p2p_read', 'p2p_read', parse_p2p_matrix),
    (['topo', '-p2p', 'w'], 'p2p_write', 'p2p_write', parse_p2p_matrix),
)


def run_nvidia_smi(module, smi_path, parsed, sources, warnings, sysfs_gpus):
    # Each nvidia-smi call spends most of its time opening the driver, so the calls run at
    # once: the module then waits about as long as the slowest, not their sum. The query's
    # answer is read first, since a driver that does not answer it fails the module.
    topo_calls = [call for call in TOPO_CALLS if parsed[call[1]] is None]
    argvs = [[smi_path] + args for args, _key, _source, _parser in topo_calls]
    query_first = parsed['query'] is None
    if query_first:
        argvs.insert(0, [smi_path, '--query-gpu=%s' % ','.join(QUERY_GPU_FIELDS), '--format=csv'])
    answers = run_c_together(module, argvs, timeout=module.params['timeout'])
    if query_first:
        run_query(module, smi_path, parsed, sources, warnings, sysfs_gpus, first_answer=answers.pop(0))

    for (args, key, source, parser), (rc, out, err) in zip(topo_calls, answers):
        if rc != 0:
            # Old drivers lack `topo -p2p`; GPUs in some VMs refuse `topo -m`.
            warnings.append("nvidia-smi %s failed with rc %d (%s); not used"
                            % (' '.join(args), rc, (err or out).strip() or 'no output'))
            continue
        parsed[key] = parse_or_fail(module, parser, out, 'nvidia-smi ' + ' '.join(args), rc)
        sources[source] = 'nvidia-smi ' + ' '.join(args)


if __name__ == '__main__':
    main()
