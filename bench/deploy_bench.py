# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy, redeploy and rollback timings on a fresh lab node, printed as one table.

Rows:
  * full deploy of the stack on a fresh lab node (deploy.yml);
  * no-op redeploy (deploy.yml again, changed=0 required) and its ratio to a bare
    fact-gathering play against the same node in the same run;
  * from the end of the failed experiment's benchmark to a healthy baseline (experiment.yml with
    sm120_allreduce_fusion and force=true; the benchmark's end read from the node's history, the
    baseline healthy when systemd saw its unit active again, which it is once the ready path
    answers; the rollback's record, written after, in the note), and what of it is not the
    server's own restart (systemd's timestamps of that restart);
  * a rejected SGLang upgrade (release set 0.5.23 whose answers part from the baseline's, so that
    the correctness lock rolls it back) from the end of its benchmark to a healthy baseline, by
    switching back to the venv the server ran from, against reinstalling the old set with pip
    into a fresh venv on the same node (the lab's two packages, from its wheel cache: a real set
    with torch and CUDA takes far longer);
  * the gate's measured noise: one benchmark of BENCH_NOISE_REPEATS runs of the lab server (its
    spread, and the smallest change the gate would call real between two such benchmarks);
  * the same no-op redeploy and bare play under Mitogen for Ansible (strategy mitogen_linear,
    docker connection) when the controller can import ansible_mitogen (requirements.txt pins
    it; MITOGEN_PYTHONPATH adds a folder that holds it), else a row that says it was skipped;
  * the revert ratio from bench/revert_patch.* and the topology ratio from
    bench/topology_runtime.py, when those scripts are present.

The no-op redeploy's slowest tasks are listed as the JSON callback times each task.

Each run starts a new lab node (container `bench-gpu-node`, or BENCH_NODE) and removes it at the
end, so the table is rerunnable. Needs the lab image (`make lab-image`; LAB_IMAGE picks it).

Usage: deploy_bench.py [--keep-node] [--json FILE] [--skip-extras]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_common import BIN, REPO_ROOT, PlaybookRun, env, run

NODE = os.environ.get("BENCH_NODE", "bench-gpu-node")
NOISE_REPEATS = int(os.environ.get("BENCH_NOISE_REPEATS", "5"))
BARE_PLAY = """---
- name: Bare fact-gathering play
  hosts: gpu_nodes
  gather_facts: true
  tasks: []
"""


def recap(output):
    found = PlaybookRun(0, output).recap
    if NODE not in found:
        raise SystemExit("no play recap for %s in the output" % NODE)
    return found[NODE]._asdict()


def make_inventory(workdir):
    os.makedirs(os.path.join(workdir, "group_vars", "gpu_nodes"))
    for name, connection in (("hosts.yml", "community.docker.docker"), ("hosts-mitogen.yml", "docker")):
        # Mitogen replaces the connection plugin it knows by its short name only.
        with open(os.path.join(workdir, name), "w") as handle:
            handle.write("gpu_nodes:\n  hosts:\n    %s:\n      ansible_connection: %s\n"
                         "      ansible_user: root\n      ansible_python_interpreter: /usr/bin/python3\n"
                         % (NODE, connection))
    # The lab inventory's settings and the experiment scenario's short benchmarks.
    sources = sorted(glob.glob(os.path.join(REPO_ROOT, "inventories", "lab", "group_vars", "gpu_nodes", "*.yml")))
    sources.append(os.path.join(REPO_ROOT, "molecule", "experiment", "inventory", "group_vars", "gpu_nodes",
                                "experiment.yml"))
    for source in sources:
        link = os.path.join(workdir, "group_vars", "gpu_nodes", os.path.basename(source))
        os.symlink(os.path.realpath(source), link)
    with open(os.path.join(workdir, "bare.yml"), "w") as handle:
        handle.write(BARE_PLAY)
    return os.path.join(workdir, "hosts.yml")


def lab_node(state, log):
    image = ["-e", "lab_image=%s" % os.environ["LAB_IMAGE"]] if os.environ.get("LAB_IMAGE") else []
    run([os.path.join(BIN, "ansible-playbook"), "molecule/resources/lab/lab-node.yml",
         "-e", "lab_node_name=%s" % NODE, "-e", "lab_node_state=%s" % state] + image, log)


def slowest_tasks(output, count=5):
    """The slowest tasks of a run, as 'name (seconds)'."""
    found = sorted(((seconds, task) for task, seconds in PlaybookRun(0, output).task_seconds().items()), reverse=True)
    return ["%s (%.1f s)" % (task, seconds) for seconds, task in found[:count]]


def mitogen_env():
    """Environment that runs a play under Mitogen's linear strategy, or None when it is not installed."""
    extra = {}
    if os.environ.get("MITOGEN_PYTHONPATH"):
        extra["PYTHONPATH"] = os.environ["MITOGEN_PYTHONPATH"]
    probe = subprocess.run([os.path.join(BIN, "python"), "-c",
                            "import os, ansible_mitogen; print(os.path.dirname(ansible_mitogen.__file__))"],
                           env=env(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           check=False)
    if probe.returncode != 0:
        return None
    extra.update({"ANSIBLE_STRATEGY_PLUGINS": os.path.join(probe.stdout.strip(), "plugins", "strategy"),
                  "ANSIBLE_STRATEGY": "mitogen_linear"})
    return extra


def node_history(log):
    _elapsed, proc = run(["docker", "exec", NODE, "cat", "/var/lib/sglang/history.jsonl"], log)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def recovery_from_history(history):
    """Seconds from the failed experiment's benchmark record to the rollback record (node clock)."""
    rollback = [r for r in history if r["event"] == "rollback"][-1]
    fused = [r for r in history if r["event"] == "benchmark" and r.get("experiment") == rollback["experiment"]][-1]
    return rollback["epoch"] - fused["epoch"], rollback


def server_restart(log):
    """The server's own last restart as systemd saw it: (seconds from leaving active, its stop
    began, to active again, the unit being active once its ready path answers; and the epoch at
    which it was active again). The lab node shares this host's kernel, so its monotonic clock is
    this process's: the offset to the epoch is read here."""
    _elapsed, proc = run(["docker", "exec", NODE, "systemctl", "show", "sglang.service",
                          "--property=ActiveExitTimestampMonotonic", "--property=ActiveEnterTimestampMonotonic"], log)
    values = dict(line.split("=", 1) for line in proc.stdout.split())
    entered, exited = int(values["ActiveEnterTimestampMonotonic"]) / 1e6, int(values["ActiveExitTimestampMonotonic"]) / 1e6
    return entered - exited, entered + (time.time() - time.monotonic())


def noise_row(history):
    """The spread of the latest benchmark, and what the gate would call inconclusive between two like it."""
    from ansible_collections.inferops.serving.plugins.module_utils._experiment import noise

    metrics = [r for r in history if r["event"] == "benchmark"][-1]["metrics"]
    spread = metrics["spread"]["output_throughput"]
    margin = noise(metrics, metrics)
    return ["gate noise, %d benchmark runs (lab)" % spread["n"], "cv %.2f%%" % spread["cv_pct"],
            "%.1f +/- %.1f tok/s (min %.1f, max %.1f, 95%% CI +/- %.1f); the gate calls a change within "
            "+/- %.1f%% (at least serving_gate_min_effect) inconclusive; %s tok/J"
            % (spread["mean"], spread["stdev"], spread["min"], spread["max"], spread["ci95"], margin * 100.0,
               metrics.get("tokens_per_joule"))]


# An upgrade the correctness lock rejects: the lab's simulated server answers differently from token 6.
REJECTED_UPGRADE = {"bench_rejected_upgrade": {
    "description": "Release set 0.5.23 whose answers part from the baseline's.",
    "vars": {"sglang_release_set": "0.5.23",
             "sglang_server_extra_args": {"nsa-decode-backend": False, "nsa-prefill-backend": False,
                                          "dsa-decode-backend": "trtllm", "dsa-prefill-backend": "trtllm"},
             "sglang_server_extra_env": {"INFEROPS_LAB_SIM_DIVERGE_AT": "6"}}}}
# The old set reinstalled with pip instead: a fresh venv and the packages the lab installs, no
# dependencies. Not under /tmp: the lab node mounts it noexec, as a hardened host does.
REINSTALL_VENV = "/var/lib/inferops-bench-reinstall"
PIP_REINSTALL = ("set -e; rm -rf {venv}; python3 -m venv {venv}; {venv}/bin/pip install -q --disable-pip-version-check "
                 "--no-deps sglang==0.5.9 flashinfer-python==0.6.3; rm -rf {venv}").format(venv=REINSTALL_VENV)


def upgrade_rows(playbook, log):
    _elapsed, proc = run(playbook + ["playbooks/experiment.yml", "-e", json.dumps({
        "serving_experiments": REJECTED_UPGRADE, "serving_experiment": "bench_rejected_upgrade"})], log, check=False)
    if proc.returncode == 0 or not PlaybookRun(proc.returncode, proc.stdout).said("answers changed"):
        raise SystemExit("the rejected upgrade was not rolled back by the correctness lock; see %s" % log)
    recovery, rollback = recovery_from_history(node_history(log))
    reinstall, _proc = run(["docker", "exec", NODE, "sh", "-c", PIP_REINSTALL], log)
    return [["rejected upgrade's benchmark -> healthy baseline", "%.1f s" % recovery,
             "%s; %s" % (rollback.get("how", ""), rollback.get("reason", ""))],
            ["the old set reinstalled with pip instead (no restart)", "%.1f s" % reinstall,
             "sglang 0.5.9 + flashinfer-python 0.6.3 without dependencies into a fresh venv, lab wheel cache"]]


def optional_rows(workdir, log):
    rows = []
    for script in sorted(glob.glob(os.path.join(REPO_ROOT, "bench", "revert_patch.*"))):
        out = os.path.join(workdir, "revert.json")
        argv = ([sys.executable] if script.endswith(".py") else ["bash"]) + [script, "--json", out]
        _elapsed, proc = run(argv, log, check=False)
        if proc.returncode == 0 and os.path.exists(out):
            with open(out) as handle:
                data = json.load(handle)
            rows.extend(data.get("rows") or [[data.get("name", "revert SM120 patch"), data.get("value", ""),
                                              data.get("note", "")]])
        else:
            rows.append(["revert ratio (%s)" % os.path.basename(script), "not measured",
                         "rc=%d, see %s" % (proc.returncode, log)])
    topology = os.path.join(REPO_ROOT, "bench", "topology_runtime.py")
    if os.path.exists(topology):
        out = os.path.join(workdir, "topology.json")
        _elapsed, proc = run([sys.executable, topology, "--json", out], log, check=False)
        if proc.returncode == 0 and os.path.exists(out):
            with open(out) as handle:
                data = json.load(handle)
            note = "%.3f s vs %.3f s, %s nvidia-smi, %d GPUs; an empty module takes %.3f s here" % (
                data["module_seconds"], data["bare_seconds"], "simulated" if data["simulated"] else "real",
                data["gpu_count"], data["empty_module_seconds"])
            rows.append(["nccl_topology module / its bare nvidia-smi calls", "%sx" % data["ratio"], note])
        else:
            rows.append(["nccl_topology vs bare nvidia-smi", "not measured", "rc=%d, see %s" % (proc.returncode, log)])
    return rows


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--keep-node", action="store_true", help="leave the lab node running afterwards")
    parser.add_argument("--json", dest="json_file", help="also write the table as JSON here")
    parser.add_argument("--skip-extras", action="store_true",
                        help="leave out the revert and topology scripts (their own rows)")
    args = parser.parse_args(argv)

    workdir = tempfile.mkdtemp(prefix="inferops-bench-")
    log = os.path.join(workdir, "bench.log")
    inventory = make_inventory(workdir)
    playbook = [os.path.join(BIN, "ansible-playbook"), "-i", inventory, "-l", NODE]
    rows = []
    lab_node("absent", log)
    lab_node("started", log)
    # The simulated server reports GPU load to the lab's nvidia-smi through this folder.
    run(["docker", "exec", NODE, "install", "-d", "-m", "1777", "/run/inferops-lab"], log)
    try:
        full, proc = run(playbook + ["deploy.yml"], log)
        rows.append(["full deploy, fresh lab node", "%.1f s" % full, "changed=%d" % recap(proc.stdout)["changed"]])

        noop, proc = run(playbook + ["deploy.yml"], log)
        slowest = slowest_tasks(proc.stdout)
        noop_recap = recap(proc.stdout)
        if noop_recap["changed"]:
            raise SystemExit("the redeploy changed %d things; see %s" % (noop_recap["changed"], log))
        bare, _proc = run(playbook + [os.path.join(workdir, "bare.yml")], log)
        rows.append(["no-op redeploy (changed=0)", "%.1f s" % noop, "%d tasks ok" % noop_recap["ok"]])
        rows.append(["bare fact-gathering play", "%.1f s" % bare, "same node, same run"])
        rows.append(["no-op redeploy / bare play", "%.1fx" % (noop / bare), ""])
        rows.append(["slowest no-op tasks", slowest[0] if slowest else "n/a", "; ".join(slowest[1:])])

        mitogen = mitogen_env()
        if mitogen is None:
            rows.append(["no-op redeploy / bare play, Mitogen", "skipped",
                         "ansible_mitogen not importable: pip install mitogen (requirements.txt), "
                         "or set MITOGEN_PYTHONPATH"])
        else:
            mitogen_playbook = [os.path.join(BIN, "ansible-playbook"), "-i",
                                os.path.join(workdir, "hosts-mitogen.yml"), "-l", NODE]
            m_noop, proc = run(mitogen_playbook + ["deploy.yml"], log, check=False, extra_env=mitogen)
            m_recap = recap(proc.stdout) if proc.returncode == 0 else None
            if m_recap is None or m_recap["changed"]:
                rows.append(["no-op redeploy, Mitogen", "failed", "rc=%d, see %s" % (proc.returncode, log)])
            else:
                m_bare, _proc = run(mitogen_playbook + [os.path.join(workdir, "bare.yml")], log, extra_env=mitogen)
                rows.append(["no-op redeploy, Mitogen (changed=0)", "%.1f s" % m_noop,
                             "strategy mitogen_linear, docker connection"])
                rows.append(["bare fact-gathering play, Mitogen", "%.1f s" % m_bare, ""])
                rows.append(["no-op redeploy, Mitogen / bare play (default)", "%.1fx" % (m_noop / bare),
                             "%.1fx of the Mitogen bare play" % (m_noop / m_bare)])

        run(playbook + ["playbooks/benchmark.yml", "-e", "serving_benchmark_repeats=%d" % NOISE_REPEATS], log)
        rows.append(noise_row(node_history(log)))
        _elapsed, proc = run(playbook + ["playbooks/experiment.yml", "-e", "serving_experiment=sm120_allreduce_fusion",
                                         "-e", "serving_experiment_force=true"], log, check=False)
        if proc.returncode == 0 or not PlaybookRun(proc.returncode, proc.stdout).said("rolled back"):
            raise SystemExit("the forced experiment was not rolled back; see %s" % log)
        recovered, rollback = recovery_from_history(node_history(log))
        restart, healthy_epoch = server_restart(log)
        # Healthy again when the unit is active again (it is once its ready path answers); the
        # rollback's record is written after that, with the deploy record of what runs again.
        healthy = healthy_epoch - (rollback["epoch"] - recovered)
        rows.append(["failed experiment's benchmark -> healthy baseline", "%.1f s" % healthy,
                     "%s; rollback recorded after %.1f s" % (rollback.get("message", ""), recovered)])
        rows.append(["... beyond the server's own restart (goal: at most 5 s)", "%.1f s" % (healthy - restart),
                     "the rollback's restart until its ready path answers, as systemd saw it: %.1f s (%s)"
                     % (restart, rollback.get("how", ""))])
        after, proc = run(playbook + ["deploy.yml"], log)
        rows.append(["deploy.yml after the rollback", "%.1f s" % after,
                     "changed=%d" % recap(proc.stdout)["changed"]])
        rows.extend(upgrade_rows(playbook, log))
    finally:
        if not args.keep_node:
            lab_node("absent", log)
    if not args.skip_extras:
        rows.extend(optional_rows(workdir, log))

    width = [max(len(str(r[i])) for r in rows + [["measurement", "value", "note"]]) for i in range(3)]
    line = "| %s | %s | %s |"
    print(line % tuple(h.ljust(w) for h, w in zip(("measurement", "value", "note"), width)))
    print(line % tuple("-" * w for w in width))
    for row in rows:
        print(line % tuple(str(c).ljust(w) for c, w in zip(row, width)))
    print("\nlog: %s" % log)
    if args.json_file:
        with open(args.json_file, "w") as handle:
            json.dump({"rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
