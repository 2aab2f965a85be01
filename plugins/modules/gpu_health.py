#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpu_health
short_description: Decide whether a node's GPUs are fit to serve
version_added: "0.1.0"
description:
  - Reads C(nvidia-smi -q -x) and the kernel log since boot and says whether the node's GPUs are fit
    to serve (RV(healthy)), with one sentence per problem that names the GPU and what to do.
  - "Per GPU from the XML: the recovery action the driver asks for (C(gpu_recovery_action): C(Reset),
    C(Reboot), C(Drain P2P), C(Drain and Reset); drivers before R570 flag C(gpu_reset_status) instead),
    ECC mode and uncorrectable ECC counts (volatile and aggregate), pending page retirement, the row
    remapper (pending remapping, remapping failure), pending or impossible memory repair, persistence mode."
  - "From the kernel log, the NVIDIA Xid lines of each GPU (C(NVRM: Xid) followed by the bus and the code);
    those in O(fatal_xids) make the node unhealthy. A GPU reported as fallen off the bus without an Xid
    line counts as Xid 79. The Xid lines are read by the same parser as the node metrics collector's."
  - The kernel log comes from C(journalctl -k -b -o short-monotonic), or C(dmesg) where the journal has
    nothing; when neither can be read, Xids are not checked and RV(gpu_warnings) says so.
  - With O(smi_xml) and O(kernel_log) the module reads those texts instead (saved outputs, the lab, tests).
    With O(smi_xml) alone the node's kernel log is not read, so that a saved XML is never judged by another
    host's log; Xids are then not checked.
  - Fails, rather than answering healthy, when nvidia-smi is missing, fails without printing XML, prints
    something that is not its XML, or does not answer within O(timeout) (RV(nvidia_smi_timeout)). A GPU
    that hangs nvidia-smi is not fit to serve, and the check never waits on it for longer.
  - Only reads; never changes the node.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  smi_xml:
    description:
      - Output of C(nvidia-smi -q -x) to read instead of running it.
    type: str
  kernel_log:
    description:
      - Kernel log text (C(dmesg), C(journalctl -k -b)) to read instead of the node's.
      - An empty string means a log without Xid lines.
    type: str
  kernel_log_file:
    description:
      - A file on the node whose text is read as the kernel log instead of the node's (a lab whose containers
        would read the host's log, a saved C(dmesg)). Its absence fails the module.
      - Mutually exclusive with O(kernel_log).
    type: path
  expected_gpu_count:
    description:
      - Number of GPUs the node should have; fewer in nvidia-smi makes the node unhealthy, more is a warning.
      - Not checked when not set.
    type: int
  fatal_xids:
    description:
      - Xid codes that make the node unhealthy when they appear for a GPU since boot.
      - "The default: 48 (double-bit ECC error), 79 (GPU fallen off the bus), 95 (uncontained ECC error),
        119 (GSP firmware timeout) and 154 (recovery action changed to a reset or a reboot; a 154 that
        changes it back to None is the recovery and does not count)."
      - Other Xids (13, 31, 43 and the like, mostly faults of one application) are listed per GPU in
        RV(gpus[].xids) but leave the node healthy.
    type: list
    elements: int
    default: [48, 79, 95, 119, 154]
  require_persistence_mode:
    description:
      - Make persistence mode off a problem. Otherwise it is a warning.
    type: bool
    default: false
  ignore_xids_before:
    description:
      - Seconds since boot; Xid lines stamped at or before it are left out.
      - An Xid line stays in the kernel log until the node reboots. After a GPU reset without a reboot,
        set this to the uptime at the reset (first field of C(/proc/uptime)) so that the faults the reset
        cleared no longer count. Lines without a timestamp always count.
    type: float
  nvidia_smi:
    description: Name or path of the nvidia-smi program.
    type: str
    default: nvidia-smi
  timeout:
    description:
      - Seconds to wait for C(nvidia-smi -q -x), and for the kernel log, before giving up on them.
      - nvidia-smi past it is killed; one stuck in the driver, which survives being killed, is left behind.
        The module then fails with RV(nvidia_smi_timeout) true instead of waiting on the stuck driver.
    type: int
    default: 60
attributes:
  check_mode:
    description: Can run in check mode and return the same result.
    support: full
    details: Only reads.
  diff_mode:
    description: Returns details on what has changed.
    support: none
notes:
  - "What each finding asks for, strongest first (RV(action)): C(replace) (row remapping failure, memory the GPU
    cannot repair), C(reboot) (recovery action Reboot, Xid 79, a GPU missing), C(reset) (recovery action Reset or
    Drain and Reset, pending row remapping, pending page retirement or memory repair, uncorrectable ECC errors since
    the driver loaded, Xid 48, 95, 119), C(investigate), C(drain) (recovery action Drain P2P), C(configure)
    (persistence mode with O(require_persistence_mode))."
  - Uncorrectable ECC errors over the GPU's life with none since the driver loaded, ECC off and persistence mode
    off are warnings.
  - GPU indexes follow the order nvidia-smi lists the GPUs in, which is its index order.
seealso:
  - module: inferops.serving.pci_gpus
  - module: inferops.serving.nccl_topology
'''

EXAMPLES = r'''
- name: Check the GPUs before the server starts
  inferops.serving.gpu_health:
    expected_gpu_count: 8
  register: __gpu_health

- name: Stop on GPUs that are not fit to serve
  ansible.builtin.assert:
    that: __gpu_health.healthy
    fail_msg: "{{ __gpu_health.verdict }}: {{ __gpu_health.problems | join(' ') }}"

- name: After resetting GPU 3 without a reboot, count only the Xids since the reset
  inferops.serving.gpu_health:
    expected_gpu_count: 8
    ignore_xids_before: 81234.5

- name: Read a support bundle on the controller
  inferops.serving.gpu_health:
    smi_xml: "{{ lookup('ansible.builtin.file', 'bundle/nvidia-smi-q.xml') }}"
    kernel_log: "{{ lookup('ansible.builtin.file', 'bundle/dmesg.txt') }}"
  delegate_to: localhost
'''

RETURN = r'''
healthy:
  description: Whether every GPU is fit to serve (no problem found; warnings allowed).
  returned: always
  type: bool
  sample: true
verdict:
  description: One line, C(healthy) or C(unhealthy (<action>)), with what was found.
  returned: always
  type: str
  sample: "unhealthy (reset): GPU 0 recovery action Reset"
action:
  description: The strongest step the problems ask for, C(none) when healthy.
  returned: always
  type: str
  sample: reset
problems:
  description: One sentence per problem, naming the GPU, what is wrong and what to do.
  returned: always
  type: list
  elements: str
  sample: ["GPU 0 (0000:00:06.0, NVIDIA H200): the driver asks for recovery action 'Reset'; reset the GPU
            (nvidia-smi -r, or on a Proxmox VM the host resets the device / power-cycles the VM)."]
gpu_warnings:
  description:
    - One sentence per finding that does not make the node unhealthy; each is also shown as a warning of the task.
  returned: always
  type: list
  elements: str
  sample: ["GPU 0 (0000:00:06.0, NVIDIA H200): persistence mode is off; enable it (nvidia-persistenced, or
            nvidia-smi -pm 1) so the driver keeps the GPU initialised between processes."]
gpus:
  description: One entry per GPU nvidia-smi lists, in its index order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: nvidia-smi index.
      type: int
      sample: 0
    bus_id:
      description: PCI bus id, 4-digit domain, lower case.
      type: str
      sample: "0000:00:06.0"
    name:
      description: Product name.
      type: str
      sample: NVIDIA H200
    uuid:
      description: GPU UUID.
      type: str
      sample: GPU-00000000-0000-0000-0000-000000000000
    readings:
      description:
        - What was read from the XML; null where the GPU or driver does not report it.
        - "Keys: C(persistence_mode), C(recovery_action), C(reset_required), C(drain_and_reset_recommended),
          C(ecc_mode), C(ecc_mode_pending), C(ecc_uncorrectable_volatile), C(ecc_uncorrectable_aggregate),
          C(sram_threshold_exceeded), C(memory_repair_pending), C(unrepairable_memory), C(retired_pages),
          C(retired_pages_pending), C(remapped_rows_correctable), C(remapped_rows_uncorrectable),
          C(remapped_rows_pending), C(remapping_failure)."
      type: dict
      sample: {"recovery_action": "None", "persistence_mode": "Enabled", "remapped_rows_pending": false}
    xids:
      description: Each Xid code seen for the GPU since boot (or since O(ignore_xids_before)).
      type: list
      elements: dict
      contains:
        xid:
          description: Xid code.
          type: int
          sample: 13
        count:
          description: Lines with that code.
          type: int
          sample: 2
        fatal:
          description: Whether it made the GPU unhealthy.
          type: bool
          sample: false
        last_detail:
          description: The driver's text after the code on the last such line.
          type: str
          sample: "pid=2342, name=python3, Graphics Exception: ESR 0x504648=0x102000e"
    findings:
      description: What was found on the GPU, problems and warnings.
      type: list
      elements: dict
      contains:
        check:
          description:
            - What was checked, one of C(recovery_action), C(xid), C(row_remapping_failure),
              C(row_remapping_pending), C(unrepairable_memory), C(memory_repair_pending), C(ecc_uncorrectable),
              C(ecc_uncorrectable_lifetime), C(retired_pages_pending), C(ecc_mode), C(persistence_mode).
          type: str
          sample: recovery_action
        severity:
          description: C(problem) (the node is unhealthy) or C(warning).
          type: str
          sample: problem
        action:
          description: What it asks for (see RV(action)); C(none) for a warning.
          type: str
          sample: reset
        summary:
          description: A few words, as the verdict lists them.
          type: str
          sample: GPU 0 recovery action Reset
        message:
          description: The sentence, as RV(problems) or RV(gpu_warnings) holds it.
          type: str
          sample: "GPU 0 (0000:00:06.0, NVIDIA H200): the driver asks for recovery action 'Reset'; reset the GPU ..."
node_findings:
  description:
    - Findings that belong to no listed GPU, as RV(gpus[].findings) shapes them; C(check) is C(gpu_count),
      C(xid) (a GPU nvidia-smi does not list), C(nvidia_smi) or C(kernel_log).
  returned: always
  type: list
  elements: dict
  sample: []
gpu_count:
  description: Number of GPUs nvidia-smi lists.
  returned: always
  type: int
  sample: 8
expected_gpu_count:
  description: O(expected_gpu_count) as given, or null.
  returned: always
  type: int
  sample: 8
driver_version:
  description: NVIDIA driver version nvidia-smi reports.
  returned: always
  type: str
  sample: "580.159.04"
fatal_xids:
  description: The Xid codes that counted as fatal, sorted.
  returned: always
  type: list
  elements: int
  sample: [48, 79, 95, 119, 154]
xids_checked:
  description: Whether a kernel log was read, so that Xids were checked.
  returned: always
  type: bool
  sample: true
nvidia_smi_timeout:
  description: True when nvidia-smi did not answer within O(timeout) (the module failed).
  returned: when nvidia-smi did not answer
  type: bool
  sample: true
kernel_log_source:
  description: Where the kernel log came from (C(journalctl -k -b), C(dmesg), C(kernel_log), the path of O(kernel_log_file)), or null.
  returned: always
  type: str
  sample: journalctl -k -b
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
)
from ansible_collections.inferops.serving.plugins.module_utils._gpu_health import (
    GpuHealthError,
    assess,
    parse_smi_xml,
)


def read_smi_xml(module):
    """The XML, and what nvidia-smi said when it exited non-zero but still described GPUs."""
    smi = module.params['nvidia_smi']
    smi_path = (smi if os.access(smi, os.X_OK) else None) if os.path.sep in smi else find_nvidia_smi(module, smi)
    if smi_path is None:
        module.fail_json(msg="%s not found on PATH or in %s: the NVIDIA driver is not installed, so the GPUs cannot "
                             "be checked" % (smi, ", ".join(NVIDIA_SMI_DIRS)), healthy=False, nvidia_smi_missing=True)
    cmd = [smi_path, '-q', '-x']
    try:
        rc, out, err = run_c(module, cmd, timeout=module.params['timeout'])
    except CommandTimeout as exc:
        module.fail_json(msg="%s. %s" % (exc, NVIDIA_SMI_STUCK), cmd=cmd, healthy=False, nvidia_smi_timeout=True)
    if rc == 0:
        return out, None
    # nvidia-smi prints its complaints on stdout, and may still describe the GPUs it could reach.
    xml_start = out.find('<')
    said = ' '.join(line.strip() for line in (err + '\n' + (out[:xml_start] if xml_start >= 0 else out)).splitlines()
                    if line.strip())
    if xml_start >= 0:
        try:
            if parse_smi_xml(out[xml_start:])['gpus']:
                return out[xml_start:], "exit code %d%s" % (rc, ": %s" % said if said else "")
        except GpuHealthError:
            pass
    module.fail_json(msg="%s failed with rc %d: %s. The driver does not answer: a GPU fell off the bus or the driver "
                         "is not loaded; read the kernel log (dmesg), then reboot the node."
                         % (' '.join(cmd), rc, said.rstrip('.') or 'no output'),
                     rc=rc, stdout=out, stderr=err, cmd=cmd, healthy=False)


def read_kernel_log(module):
    """(text, source), or (None, None) when neither the journal nor dmesg gives it."""
    attempts = (
        ('journalctl', ['-k', '-b', '-o', 'short-monotonic', '--no-pager', '-q'], 'journalctl -k -b'),
        ('dmesg', [], 'dmesg'),
    )
    for program, args, source in attempts:
        path = module.get_bin_path(program)
        if path is None:
            continue
        try:
            rc, out, _err = run_c(module, [path] + args, timeout=module.params['timeout'])
        except CommandTimeout:
            continue
        # A container or a host without a persistent journal answers rc 0 with nothing.
        if rc == 0 and out.strip():
            return out, source
    return None, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            smi_xml=dict(type='str'),
            kernel_log=dict(type='str'),
            kernel_log_file=dict(type='path'),
            expected_gpu_count=dict(type='int'),
            fatal_xids=dict(type='list', elements='int', default=[48, 79, 95, 119, 154]),
            require_persistence_mode=dict(type='bool', default=False),
            ignore_xids_before=dict(type='float'),
            nvidia_smi=dict(type='str', default='nvidia-smi'),
            timeout=dict(type='int', default=NVIDIA_SMI_TIMEOUT),
        ),
        mutually_exclusive=[('kernel_log', 'kernel_log_file')],
        supports_check_mode=True,
    )
    params = module.params
    if params['expected_gpu_count'] is not None and params['expected_gpu_count'] < 1:
        module.fail_json(msg="expected_gpu_count must be 1 or more, got %d" % params['expected_gpu_count'])
    if params['timeout'] < 1:
        module.fail_json(msg="timeout must be 1 or more seconds, got %d" % params['timeout'])

    smi_failure = None
    if params['smi_xml'] is not None:
        smi_xml = params['smi_xml']
    else:
        smi_xml, smi_failure = read_smi_xml(module)
    if params['kernel_log'] is not None:
        kernel_log, source = params['kernel_log'], 'kernel_log'
    elif params['kernel_log_file'] is not None:
        try:
            with open(params['kernel_log_file'], 'rb') as handle:
                kernel_log = handle.read().decode('utf-8', 'replace')
        except (IOError, OSError) as exc:
            module.fail_json(msg="Cannot read kernel_log_file %s: %s" % (params['kernel_log_file'], to_native(exc)),
                             healthy=False)
        source = params['kernel_log_file']
    elif params['smi_xml'] is not None:
        kernel_log, source = None, None
    else:
        kernel_log, source = read_kernel_log(module)

    try:
        result = assess(smi_xml, kernel_log=kernel_log, expected_gpu_count=params['expected_gpu_count'],
                        fatal_xids=params['fatal_xids'], require_persistence_mode=params['require_persistence_mode'],
                        ignore_xids_before=params['ignore_xids_before'], smi_failure=smi_failure)
    except GpuHealthError as exc:
        origin = 'smi_xml' if params['smi_xml'] is not None else 'nvidia-smi -q -x'
        module.fail_json(msg="Cannot read %s: %s" % (origin, to_native(exc)), stdout=smi_xml, healthy=False)
    for warning in result['gpu_warnings']:
        module.warn(warning)
    module.exit_json(changed=False, kernel_log_source=source, **result)


if __name__ == '__main__':
    main()
