#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: nccl_allreduce_check
short_description: All-reduce across every GPU through NCCL, with every element checked
version_added: 0.1.0
description:
  - Runs an all-reduce through C(torch.distributed) and NCCL, one process per GPU, with
    the interpreter given in O(python) (the serving venv, which holds torch).
  - Every rank fills its buffer with a known pattern; the result is compared element by
    element with the exact expected sum, once on the first all-reduce and once more after
    the timed loop. A bandwidth test alone cannot prove P2P works; on some cards P2P
    passed bandwidth tests while collectives returned wrong data.
  - Times O(iters) all-reduces per size after O(warmup) and reports latency and NCCL's
    bus bandwidth (algorithm bandwidth x 2(n-1)/n), taking the slowest rank.
  - A collective that hangs is stopped after O(timeout) seconds by killing the job's
    whole process group; the result then says so instead of the task hanging.
  - Returns C(ansible_facts.nccl_allreduce_check), which the topology advice and the
    experiments read (P2P access matrix, NCCL transports, correctness, bandwidth).
  - Fails with a message naming the cause when torch is missing, a GPU is not visible,
    a sum is wrong or the job timed out, unless O(fail_on_error=false).
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  python:
    description:
      - Interpreter that can import torch with CUDA.
    type: path
    default: /opt/sglang/venv/bin/python
  world_size:
    description:
      - Number of GPUs (ranks) to use; C(0) uses every GPU torch sees.
    type: int
    default: 0
  sizes:
    description:
      - Message sizes in bytes (float32 elements, rounded down to a multiple of 4).
    type: list
    elements: int
    default: [4096, 1048576, 67108864]
  iters:
    description: Timed all-reduces per size.
    type: int
    default: 20
  warmup:
    description: Untimed all-reduces per size before the timed ones.
    type: int
    default: 5
  timeout:
    description:
      - Seconds the whole job may take, including NCCL's start; past it the process group is killed.
    type: int
    default: 180
  init_timeout:
    description: Seconds C(torch.distributed) waits for every rank to join.
    type: int
    default: 60
  environment:
    description:
      - Variables added to the job's environment, for example C(CUDA_VISIBLE_DEVICES) or
        the NCCL settings the server runs with (C(NCCL_P2P_LEVEL)).
    type: dict
    default: {}
  nccl_debug:
    description:
      - Set C(NCCL_DEBUG=INFO) (subsystems C(INIT,ENV)) unless O(environment) sets it, so the
        result can name the transport NCCL chose for each connection (C(P2P), C(SHM), C(NET)).
    type: bool
    default: true
  log_path:
    description:
      - File to write the job's full output to (NCCL's log included), kept as evidence.
    type: path
  inject_wrong:
    description:
      - Meant only for proving the check itself. After the first all-reduce of every size
        that holds element O(inject_wrong.index), rank O(inject_wrong.rank) adds 1 to that
        element of its result before the comparison, so a check that works must report
        exactly that element as wrong (C(wrong_result), one wrong element per such size).
      - The facts name the injection and the failure message says the element was made
        wrong on purpose. Never set it where the result decides anything.
      - A rank the job does not have is refused by the job (C(bad_argument)).
    type: dict
    suboptions:
      rank:
        description: Rank (GPU index within the job) whose result gets the wrong element.
        type: int
        required: true
      index:
        description: Element (float32) of that rank's result to change; below the largest size's element count.
        type: int
        required: true
  fail_on_error:
    description:
      - Fail the task when the check did not pass. With C(false) the task succeeds and the
        caller decides from RV(ansible_facts.nccl_allreduce_check.ok).
    type: bool
    default: true
attributes:
  check_mode:
    description: Runs in check mode too; it changes nothing on the node.
    support: full
  diff_mode:
    description: Returns details on what has changed.
    support: none
notes:
  - The job is C(plugins/module_utils/_nccl_allreduce_worker.py), written to a temporary file
    and run with O(python).
seealso:
  - module: inferops.serving.nccl_topology
'''

EXAMPLES = r'''
- name: Check an all-reduce across every GPU of the VM
  inferops.serving.nccl_allreduce_check:
    environment:
      NCCL_P2P_LEVEL: "5"

- name: Check without failing, to decide in the play
  inferops.serving.nccl_allreduce_check:
    fail_on_error: false
    timeout: 120
    log_path: /var/lib/sglang/allreduce-check.log
  register: __allreduce

- name: Prove the check finds a wrong element (element 777 of rank 1 is changed on purpose)
  inferops.serving.nccl_allreduce_check:
    inject_wrong:
      rank: 1
      index: 777
    fail_on_error: false
  register: __allreduce_proof

- name: Say whether P2P works between every pair
  ansible.builtin.debug:
    msg: "{{ ansible_facts['nccl_allreduce_check']['p2p_all_pairs'] }}"
'''

RETURN = r'''
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    nccl_allreduce_check:
      description: The check's result.
      type: dict
      contains:
        ok:
          description: Every size was checked on every rank, with no wrong element, and the job finished in time.
          type: bool
        failure:
          description:
            - Null when C(ok) is true, else C(kind) (torch_missing, no_cuda, gpu_not_visible,
              bad_argument, worker_failed, timeout, wrong_result, no_output) and C(msg).
          type: dict
        world_size:
          description: Number of ranks (GPUs) in the job.
          type: int
        visible_gpus:
          description: GPUs torch saw.
          type: int
        torch_version:
          description: Version of torch the job ran with.
          type: str
        cuda_version:
          description: CUDA version torch was built for.
          type: str
        nccl_version:
          description: NCCL version torch loaded.
          type: str
        python:
          description: The interpreter that ran the job.
          type: str
        gpus:
          description: Index, name and PCI bus id of each GPU taking part.
          type: list
          elements: dict
        p2p_access:
          description: C(torch.cuda.can_device_access_peer) for every ordered pair (true on the diagonal).
          type: list
          elements: list
        p2p_all_pairs:
          description: Every pair of GPUs has peer access; null when the job never got that far.
          type: bool
        transports:
          description: Transports NCCL used between ranks (C(P2P), C(SHM), C(NET)); empty without O(nccl_debug).
          type: list
          elements: str
        connections:
          description: The transport of each rank-to-rank connection NCCL set up.
          type: list
          elements: dict
        results:
          description:
            - Per size, C(bytes), C(elements), C(correct), C(mismatches), C(first_mismatch),
              C(time_us) (mean of one all-reduce, slowest rank), C(algbw_gbps), C(busbw_gbps).
          type: list
          elements: dict
        timed_out:
          description: The job was killed at O(timeout).
          type: bool
        inject_wrong:
          description: C(rank) and C(index) of the element made wrong on purpose (O(inject_wrong)); null when none was.
          type: dict
evidence:
  description: One line per size (state, latency, bus bandwidth), the P2P matrix and the transports.
  returned: always
  type: list
  elements: str
log_tail:
  description: The last lines of the job's output other than its events (NCCL's log, tracebacks) when the check did not pass.
  returned: when the check did not pass
  type: str
job_rc:
  description:
    - Exit code of the job (negative when killed by a signal). Not called C(rc), because Ansible
      fails every result whose C(rc) is not 0 and O(fail_on_error=false) must be able to succeed.
  returned: always
  type: int
seconds:
  description: Wall time of the job.
  returned: always
  type: float
'''

import inspect
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils import _nccl_allreduce_worker
from ansible_collections.inferops.serving.plugins.module_utils._bounded_run import run_bounded
from ansible_collections.inferops.serving.plugins.module_utils._nccl_allreduce import (
    AllreduceCheckError,
    DEFAULT_SIZES,
    MARKER,
    evidence,
    inject_wrong_problem,
    parse_events,
    parse_nccl_log,
    summarize,
    worker_argv,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', default='/opt/sglang/venv/bin/python'),
            world_size=dict(type='int', default=0),
            sizes=dict(type='list', elements='int', default=list(DEFAULT_SIZES)),
            iters=dict(type='int', default=20),
            warmup=dict(type='int', default=5),
            timeout=dict(type='int', default=180),
            init_timeout=dict(type='int', default=60),
            environment=dict(type='dict', default={}),
            nccl_debug=dict(type='bool', default=True),
            log_path=dict(type='path'),
            inject_wrong=dict(type='dict', options=dict(
                rank=dict(type='int', required=True),
                index=dict(type='int', required=True),
            )),
            fail_on_error=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not os.access(params['python'], os.X_OK):
        module.fail_json(msg="python: %s is not an executable; point python at the interpreter of the venv "
                             "that holds torch (the serving venv)." % params['python'])
    for name in ('iters', 'timeout', 'init_timeout'):
        if params[name] < 1:
            module.fail_json(msg="%s must be at least 1 (got %s)." % (name, params[name]))
    if params['world_size'] < 0 or params['warmup'] < 0 or not params['sizes'] or min(params['sizes']) < 4:
        module.fail_json(msg="world_size and warmup must not be negative and sizes must list byte counts of at "
                             "least 4 (got world_size=%s, warmup=%s, sizes=%s)."
                             % (params['world_size'], params['warmup'], params['sizes']))
    problem = inject_wrong_problem(params['inject_wrong'], params['sizes'])
    if problem:
        module.fail_json(msg=problem)

    worker = os.path.join(module.tmpdir, 'nccl_allreduce_worker.py')
    with open(worker, 'w') as handle:
        handle.write(inspect.getsource(_nccl_allreduce_worker))
    env = dict(os.environ, PYTHONUNBUFFERED='1', LC_ALL='C')
    if params['nccl_debug']:
        env.update(NCCL_DEBUG='INFO', NCCL_DEBUG_SUBSYS='INIT,ENV')
    env.update((str(key), str(value)) for key, value in params['environment'].items())
    argv = worker_argv(params['python'], worker, params['world_size'], params['sizes'], params['iters'],
                       params['warmup'], params['init_timeout'], params['inject_wrong'])
    run = run_bounded(argv, params['timeout'], env=env, cwd=module.tmpdir)
    if params['log_path']:
        with open(params['log_path'], 'w') as handle:
            handle.write(run['stdout'])
            handle.write(run['stderr'])

    try:
        events = parse_events(run['stdout'])
    except AllreduceCheckError as exc:
        module.fail_json(msg="Cannot read the all-reduce job's output: %s" % exc, job_rc=run['rc'],
                         stdout=run['stdout'][-4000:], stderr=run['stderr'][-4000:])
    facts = summarize(events, parse_nccl_log(run['stdout'] + run['stderr']), run['rc'], run['timed_out'],
                      params['timeout'])
    result = dict(changed=False, ansible_facts=dict(nccl_allreduce_check=facts), evidence=evidence(facts),
                  job_rc=run['rc'], seconds=run['seconds'])
    if not facts['ok']:
        other = [line for line in (run['stdout'] + run['stderr']).splitlines() if MARKER not in line]
        result['log_tail'] = "\n".join(other[-40:])
        if params['fail_on_error']:
            module.fail_json(msg="All-reduce check across %s GPUs failed: %s" % (
                facts['world_size'] or params['world_size'] or 'the', facts['failure']['msg']), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
