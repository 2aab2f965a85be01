#!/usr/bin/env python3
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run time of the nccl_topology module against the bare nvidia-smi calls it makes.

One run of each, after one untimed `nvidia-smi -L` so that both sides find the
driver awake (the first call after idle pays for driver initialisation when
persistence mode is off). The module runs as Ansible runs it on a node: its
file executed by Python with the arguments in a JSON file, so the figure is the
module's own cost (interpreter start, Ansible imports, parsing) without the
controller's connection overhead.

Usage: topology_runtime.py [--nvidia-smi PATH] [--sysfs-root PATH] [--json FILE]

Without --nvidia-smi the one on PATH is used, else the lab's simulated one in
molecule/resources/lab/sim (reported as such).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMULATED = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim", "nvidia-smi")
MODULE = os.path.join(REPO_ROOT, "plugins", "modules", "nccl_topology.py")
COLLECTIONS = os.path.join(REPO_ROOT, ".collections")
# The same calls, in the same order, as plugins/modules/nccl_topology.py makes.
QUERY = "--query-gpu=index,name,pci.bus_id,compute_cap,memory.total,power.limit"
NVIDIA_SMI_CALLS = ([QUERY, "--format=csv"], ["topo", "-m"], ["topo", "-p2p", "r"], ["topo", "-p2p", "w"])
C_LOCALE = {"LANG": "C", "LC_ALL": "C"}


def ensure_collection_link():
    link = os.path.join(COLLECTIONS, "ansible_collections", "inferops", "serving")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.join("..", "..", ".."), link)


def timed(argv, env):
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)
    return time.perf_counter() - start, proc


EMPTY_MODULE = (
    "from ansible.module_utils.basic import AnsibleModule\n"
    "AnsibleModule(argument_spec={}, supports_check_mode=True).exit_json(changed=False)\n"
)


def time_empty_module(env):
    """Seconds an Ansible module that does nothing takes here: interpreter start, Ansible's imports,
    argument parsing and the JSON answer."""
    workdir = tempfile.mkdtemp()
    try:
        module = os.path.join(workdir, "empty.py")
        args_file = os.path.join(workdir, "args.json")
        with open(module, "w") as handle:
            handle.write(EMPTY_MODULE)
        with open(args_file, "w") as handle:
            json.dump({"ANSIBLE_MODULE_ARGS": {}}, handle)
        seconds, _proc = timed([sys.executable, module, args_file], env)
        return seconds
    finally:
        shutil.rmtree(workdir)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--nvidia-smi", dest="nvidia_smi")
    parser.add_argument("--sysfs-root", dest="sysfs_root")
    parser.add_argument("--json", dest="json_file", help="also write the result as JSON here")
    args = parser.parse_args(argv)

    smi = args.nvidia_smi or shutil.which("nvidia-smi")
    simulated = smi is None or os.path.realpath(smi) == os.path.realpath(SIMULATED)
    if smi is None:
        smi = SIMULATED
    env = dict(os.environ, **C_LOCALE)

    warm_rc = subprocess.run([smi, "-L"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             check=False).returncode
    if warm_rc != 0:
        sys.stderr.write("%s -L failed with rc %d: no GPU to measure against\n" % (smi, warm_rc))
        return 1

    bare = []
    for call in NVIDIA_SMI_CALLS:
        seconds, proc = timed([smi] + call, env)
        bare.append({"call": "nvidia-smi " + " ".join(call), "seconds": round(seconds, 4), "rc": proc.returncode})
    bare_total = sum(item["seconds"] for item in bare)

    ensure_collection_link()
    module_args = {"nvidia_smi": smi}
    if args.sysfs_root:
        module_args["sysfs_root"] = args.sysfs_root
    module_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [COLLECTIONS, os.environ.get("PYTHONPATH")])))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": module_args}, handle)
        args_file = handle.name
    try:
        module_seconds, proc = timed([sys.executable, MODULE, args_file], module_env)
    finally:
        os.unlink(args_file)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        sys.stderr.write("the module did not return JSON (rc %d):\n%s\n%s\n" % (proc.returncode, proc.stdout, proc.stderr))
        return 1
    if result.get("failed"):
        sys.stderr.write("the module failed: %s\n" % result.get("msg"))
        return 1
    facts = result["ansible_facts"]["nccl_topology"]
    empty_seconds = time_empty_module(module_env)

    report = {
        "nvidia_smi": smi,
        "simulated": simulated,
        "gpu_count": facts["gpu_count"],
        "gpu_names": sorted(set(gpu["name"] for gpu in facts["gpus"] if gpu["name"])),
        "bare_calls": bare,
        "bare_seconds": round(bare_total, 4),
        "module_seconds": round(module_seconds, 4),
        "ratio": round(module_seconds / bare_total, 2) if bare_total else None,
        # What any module costs on this interpreter before its own work: its floor.
        "empty_module_seconds": round(empty_seconds, 4),
        "ratio_beyond_empty_module": round((module_seconds - empty_seconds) / bare_total, 2) if bare_total else None,
        "python": sys.version.split()[0],
    }
    print("nccl_topology run time (%s nvidia-smi, %d GPU(s): %s)"
          % ("simulated" if simulated else "real", report["gpu_count"], ", ".join(report["gpu_names"])))
    for item in bare:
        print("  %-78s %8.3f s  rc=%d" % (item["call"], item["seconds"], item["rc"]))
    print("  %-78s %8.3f s" % ("bare nvidia-smi calls, together", bare_total))
    print("  %-78s %8.3f s" % ("module (python nccl_topology.py args.json)", module_seconds))
    print("  %-78s %8.3f s" % ("an empty Ansible module (python, AnsibleModule, exit_json)", empty_seconds))
    print("  ratio module / bare calls: %s (one run each)" % report["ratio"])
    print("  ratio (module - empty module) / bare calls: %s" % report["ratio_beyond_empty_module"])
    if args.json_file:
        with open(args.json_file, "w") as handle:
            json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
