# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet rows, measured in one run on four fresh lab containers (three nodes and a router).

Rows:
  * no-op redeploy of the three nodes (deploy.yml -l gpu_nodes, changed=0 required) against one
    node's no-op (deploy.yml -l <node>) in the same run; goal <= 1.3x; with the CPU seconds each
    used on the controller and in the lab nodes, which here share the controller's cores (on a
    real fleet each node's share runs on that node);
  * requests that failed through the router during a rolling redeploy that changes one argument
    on every node (molecule/fleet/loadgen.py at a fixed concurrency); goal 0;
  * p99 latency of those requests during the rollout against the 15 s before it;
  * where the fleet's no-op spends the time one node's does not: the tasks whose time grows most
    between the two no-ops, as the JSON callback times each task.

The containers (bench-fleet-*) are created at the start and removed at the end.
Usage: fleet_bench.py [--keep] [--json FILE]
"""

import argparse
import json
import os
import sys
import tempfile
import time

from bench_common import BIN, REPO_ROOT, CpuMeter, Load, PlaybookRun, container_address, inventory_vars, run

NODES = ["bench-fleet-node-1", "bench-fleet-node-2", "bench-fleet-node-3"]
ROUTER = "bench-fleet-router"
ROUTER_KEY = inventory_vars("molecule/fleet/inventory/group_vars/sglang_routers/fleet.yml")["sglang_router_api_key"]
# The plan checks every node at once.
FORKS = {"ANSIBLE_FORKS": "8"}
CORES = os.cpu_count() or 1
HOST_VARS = ("      ansible_connection: community.docker.docker\n      ansible_user: root\n"
             "      ansible_python_interpreter: /usr/bin/python3\n")


def cpu_text(fleet_seconds, one_seconds):
    if fleet_seconds is None or one_seconds is None:
        return "unavailable (no readable cgroup)"
    return "%.1f s / %.1f s" % (fleet_seconds, one_seconds)


def busy_text(fleet_cpu, fleet, one_cpu, one):
    if fleet_cpu.nodes is None or one_cpu.nodes is None:
        return "unavailable"
    return "%.2f / %.2f" % ((fleet_cpu.controller + fleet_cpu.nodes) / fleet, (one_cpu.controller + one_cpu.nodes) / one)


def growth_text(fleet_tasks, one_tasks, count=5):
    """The tasks whose time grows most from one node's no-op to the fleet's, as 'name +s (one -> fleet)'."""
    growth = sorted(((fleet_tasks.get(name, 0.0) - one_tasks.get(name, 0.0), name) for name in fleet_tasks), reverse=True)
    return ["%s +%.1f s (%.1f -> %.1f)" % (name, grown, one_tasks.get(name, 0.0), fleet_tasks[name])
            for grown, name in growth[:count] if grown > 0]


def changed_total(output):
    recap = PlaybookRun(0, output).recap
    if not recap:
        raise SystemExit("no play recap in the output")
    return sum(host.changed for host in recap.values())


def make_inventory(workdir):
    with open(os.path.join(workdir, "hosts.yml"), "w") as handle:
        handle.write("sglang_routers:\n  hosts:\n    %s:\n%s" % (ROUTER, HOST_VARS))
        handle.write("gpu_nodes:\n  hosts:\n")
        for node in NODES:
            handle.write("    %s:\n%s" % (node, HOST_VARS))
    group_vars = os.path.join(workdir, "group_vars")
    os.makedirs(os.path.join(group_vars, "gpu_nodes"))
    os.makedirs(os.path.join(group_vars, "sglang_routers"))
    os.symlink(os.path.join(REPO_ROOT, "inventories", "lab", "group_vars", "gpu_nodes", "lab.yml"),
               os.path.join(group_vars, "gpu_nodes", "lab.yml"))
    for group in ("gpu_nodes", "sglang_routers"):
        os.symlink(os.path.join(REPO_ROOT, "molecule", "fleet", "inventory", "group_vars", group, "fleet.yml"),
                   os.path.join(group_vars, group, "fleet.yml"))
    return os.path.join(workdir, "hosts.yml")


def containers(state, log):
    for name in NODES + [ROUTER]:
        run([os.path.join(BIN, "ansible-playbook"), "molecule/resources/lab/lab-node.yml", "-e", "lab_node_name=" + name,
             "-e", "lab_image=" + os.environ.get("LAB_IMAGE", "inferops-lab:bookworm"), "-e", "lab_node_state=" + state],
            log)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the containers running")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="fleet-bench-")
    log = os.path.join(workdir, "bench.log")
    inventory = make_inventory(workdir)
    playbook = [os.path.join(BIN, "ansible-playbook"), "-i", inventory, "deploy.yml"]
    containers("started", log)
    try:
        run(playbook, log, extra_env=FORKS)
        with CpuMeter(NODES + [ROUTER]) as one_cpu:
            one, proc = run(playbook + ["-l", NODES[0]], log, extra_env=FORKS)
        if changed_total(proc.stdout):
            raise SystemExit("the no-op redeploy of one node changed something; log in %s" % log)
        one_tasks = PlaybookRun(proc.returncode, proc.stdout).task_seconds()
        with CpuMeter(NODES + [ROUTER]) as fleet_cpu:
            fleet, proc = run(playbook + ["-l", "gpu_nodes"], log, extra_env=FORKS)
        if changed_total(proc.stdout):
            raise SystemExit("the no-op redeploy of the fleet changed something; log in %s" % log)
        growth = growth_text(PlaybookRun(proc.returncode, proc.stdout).task_seconds(), one_tasks)

        load = Load(workdir, "http://%s:30000" % container_address(ROUTER), ROUTER_KEY, max_seconds=900)
        time.sleep(15)
        load.mark("rollout_start")
        rollout, _proc = run(playbook + ["-e", json.dumps({"sglang_server_extra_args": {
            "enable-metrics": True, "max-running-requests": 512}})], log, extra_env=FORKS)
        load.mark("rollout_end")
        clients = load.stop()
    finally:
        if not args.keep:
            containers("absent", log)

    ratio = fleet / one
    rows = [
        ("fleet no-op redeploy, 3 nodes / 1 node", "%.1f s / %.1f s = %.2fx" % (fleet, one, ratio), "<= 1.3x"),
        ("  CPU of those no-ops, controller", "%.1f s / %.1f s" % (fleet_cpu.controller, one_cpu.controller),
         "ansible-playbook and its children"),
        ("  CPU of those no-ops, lab nodes", cpu_text(fleet_cpu.nodes, one_cpu.nodes),
         "containers on the controller's %d cores" % CORES),
        ("  cores busy during those no-ops", busy_text(fleet_cpu, fleet, one_cpu, one), "of %d" % CORES),
        ("  tasks that grow most", growth[0] if growth else "n/a", "; ".join(growth[1:])),
        ("failed requests during the rolling redeploy", "%d of %d (rollout %.0f s)"
         % (clients["during"]["failed"], clients["during"]["requests"], rollout), "0"),
        ("p99 latency during / before the rollout", "%s ms / %s ms" % (clients["during"]["p99_ms"], clients["before"]["p99_ms"]),
         "reported"),
    ]
    width = max(len(r[0]) for r in rows)
    print("%-*s  %-40s  %s" % (width, "fleet row", "measured", "goal"))
    for row in rows:
        print("%-*s  %-40s  %s" % (width, row[0], row[1], row[2]))
    print("log: %s" % log)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"noop_one_s": one, "noop_fleet_s": fleet, "ratio": ratio, "rollout_s": rollout,
                       "noop_cpu_s": {"one": {"controller": one_cpu.controller, "nodes": one_cpu.nodes},
                                      "fleet": {"controller": fleet_cpu.controller, "nodes": fleet_cpu.nodes}},
                       "noop_task_growth": growth, "clients": clients}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
