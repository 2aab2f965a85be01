# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What several modules do the same way around external commands: run them in the C locale (their
output is parsed), within a time bound where a hang is likely (nvidia-smi on a GPU that fell off
the bus never answers), find nvidia-smi where drivers and containers put it, and ask a Python
interpreter for its site-packages. ``module`` is the calling AnsibleModule, used only through
``run_command``, ``get_bin_path`` and ``fail_json``.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import threading

from ansible_collections.inferops.serving.plugins.module_utils._bounded_run import CommandTimeout, run_answered
from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (
    DistRecordError,
    interpreter_site_packages,
    venv_python,
)

C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C'}
# Where driver packages and containers put nvidia-smi when it is not on PATH.
NVIDIA_SMI_DIRS = ['/usr/bin', '/usr/local/bin', '/usr/local/nvidia/bin', '/opt/nvidia/bin']
# How long the modules that read nvidia-smi wait for it by default. It answers within seconds
# (tens of seconds on many GPUs without persistence mode); one that hangs waits on a stuck driver.
NVIDIA_SMI_TIMEOUT = 60
NVIDIA_SMI_STUCK = ("The NVIDIA driver is stuck on a GPU: typically one fell off the bus (Xid 79) or a reset is "
                    "under way. Read the kernel log (dmesg | grep -i xid), then reset the GPU or reboot the node "
                    "(on a Proxmox VM, power-cycle it: proxmox_gpu_vm_power_cycle=true).")
# What coreutils' timeout exits with when it ended the command (SIGTERM, then SIGKILL).
TIMEOUT_EXIT_STATUSES = (124, 137)
# nvidia-smi's exit statuses (its manual's RETURN VALUE) for a driver that is not loaded, and
# for a GPU that fell off the bus or became otherwise inaccessible.
NVIDIA_SMI_NO_DRIVER = 9
NVIDIA_SMI_GPU_LOST = 15
DRIVER_HINT = "Look at `dmesg | grep -i nvrm` and `dkms status`; Blackwell GPUs need the open kernel modules."


def nvidia_smi_listing_problems(rc, stdout, stderr, expected_gpus, bound):
    """Why ``timeout BOUND nvidia-smi --query-gpu=... --format=csv,noheader`` (exit status RC and its
    output) does not show the EXPECTED_GPUS GPUs the node has: sentences that say what to do, or []."""
    said = ((stderr or '').strip() or (stdout or '').strip()).splitlines()
    last_line = (': %s' % said[-1][:300]) if said else ''
    if rc in TIMEOUT_EXIT_STATUSES:
        return ["nvidia-smi did not answer within %s s (gpu_vm_nvidia_smi_timeout)." % bound, NVIDIA_SMI_STUCK]
    if rc == NVIDIA_SMI_GPU_LOST:
        return ["nvidia-smi found a GPU that fell off the bus (exit status %d%s)." % (rc, last_line), NVIDIA_SMI_STUCK]
    if rc:
        what = "found no NVIDIA driver loaded" if rc == NVIDIA_SMI_NO_DRIVER else "failed"
        return ["nvidia-smi %s (exit status %d%s)." % (what, rc, last_line), DRIVER_HINT]
    listed = [line for line in (stdout or '').splitlines() if line.strip()]
    if len(listed) != int(expected_gpus):
        return ["nvidia-smi lists %d GPU(s), expected %d (gpu_vm_expected_gpu_count, or the PCI count)."
                % (len(listed), int(expected_gpus)), DRIVER_HINT]
    return []


def run_c(module, argv, timeout=None, **kwargs):
    """``module.run_command`` with LANG/LC_ALL=C laid over any ``environ_update`` given.

    With ``timeout`` (seconds) the command runs within that bound (_bounded_run.py) instead, and
    CommandTimeout says it did not answer; ``run_command``'s other options do not apply then."""
    env = dict(kwargs.pop('environ_update', None) or {})
    env.update(C_LOCALE)
    if timeout is None:
        return module.run_command(argv, environ_update=env, **kwargs)
    return run_answered(argv, timeout, env=dict(os.environ, **env))


def run_c_together(module, argvs, timeout=None):
    """``run_c`` of every argv at once, each in its own thread; (rc, out, err) in the order given.

    For read-only commands whose run time is mostly waiting (nvidia-smi spends it opening the
    driver), so that several cost about the slowest one instead of their sum. With ``timeout``,
    CommandTimeout names the first command that did not answer."""
    results = [None] * len(argvs)

    def run(position, argv):
        # A thread must not call fail_json (its exit would end the thread, not the module):
        # the error comes back and the caller's thread fails with it.
        try:
            results[position] = run_c(module, argv, timeout=timeout, handle_exceptions=False)
        except Exception as exc:  # pylint: disable=broad-except
            results[position] = exc

    threads = [threading.Thread(target=run, args=(position, argv)) for position, argv in enumerate(argvs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, CommandTimeout):
            raise result
    for argv, result in zip(argvs, results):
        if isinstance(result, Exception):
            module.fail_json(msg="Cannot run %s: %s" % (' '.join(argv), result), cmd=argv)
    return results


def find_nvidia_smi(module, name='nvidia-smi', required=False):
    return module.get_bin_path(name, required=required, opt_dirs=NVIDIA_SMI_DIRS)


def site_packages_dirs(module):
    """The folders to search for distributions: O(site_packages), else what the interpreter of
    O(venv) or O(python) reports; fails the module with the interpreter's answer otherwise."""
    params = module.params
    if params.get('site_packages'):
        return [params['site_packages']]
    python = venv_python(params.get('venv'), params.get('python'))
    python = module.get_bin_path(python, required=True) if '/' not in python else python
    try:
        return interpreter_site_packages(lambda argv: run_c(module, argv), python)
    except DistRecordError as exc:
        module.fail_json(msg=str(exc))
