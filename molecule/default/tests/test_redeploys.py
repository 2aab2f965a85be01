"""Redeploys an operator makes on the served node: a hand edit found and put back, two runs at once.

They change the node, so they run after every other check of the scenario (pytest takes this file
last): test_default.py, the metrics and Prometheus's view read the node as the converge left it.
The last one leaves the node serving another name: `molecule converge` puts the inventory's back
before a `molecule verify` of its own.
"""
import json
import threading
import time

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY
from ansible_collections.inferops.serving.tests.utils.playbook import run_scenario_playbook

NODE = "lab-default"
testinfra_hosts = [NODE]
SERVER = "http://127.0.0.1:8000"


def _served_name(host):
    result = host.run("curl -sS -H %s %s", "Authorization: Bearer " + LAB_API_KEY, SERVER + "/v1/models")
    return json.loads(result.stdout)["data"][0]["id"]


def test_a_hand_edit_of_the_unit_is_found_by_the_plan_and_put_back(host):
    unit = "/etc/systemd/system/sglang.service"
    before = host.file(unit).content_string
    host.run("sed -i 's/^Restart=.*/Restart=no/' %s", unit)
    run = run_scenario_playbook("deploy.yml")
    assert run.returncode == 0, run.summary
    assert run.said("would change: %s changed since the last deploy" % unit), run.summary
    assert host.file(unit).content_string == before
    run = run_scenario_playbook("deploy.yml")
    assert run.returncode == 0 and run.recap[NODE].changed == 0, run.summary


# Last: it leaves the node serving the name of the run that finished last.
def test_two_deploys_started_together_end_serving_what_the_last_one_to_finish_reported(host):
    results = {}

    def deploy(name):
        run = run_scenario_playbook("deploy.yml", "-e", json.dumps({"sglang_server_extra_args": {"served-model-name": name},
                                                                    "serving_node_lock_wait": 600}))
        results[name] = (run, time.monotonic())

    threads = [threading.Thread(target=deploy, args=(name,)) for name in ("run-a", "run-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, (run, _finished) in results.items():
        assert run.returncode == 0, (name, run.summary)
    last = max(results, key=lambda name: results[name][1])
    assert _served_name(host) == last
    assert any(run.said("s for the node lock of") for run, _finished in results.values()), "neither run waited for the other"
    # The unit, the running server and the node's deploy record agree, and no lock is left behind.
    exec_start = [line for line in host.file("/etc/systemd/system/sglang.service").content_string.splitlines()
                  if line.startswith("ExecStart=")][0].split()
    assert exec_start[exec_start.index("--served-model-name") + 1] == last
    recorded = [json.loads(line) for line in host.file("/var/lib/sglang/history.jsonl").content_string.splitlines()
                if line.strip()]
    assert [record for record in recorded if record["event"] == "deploy"][-1]["server"]["args"]["served-model-name"] == last
    assert not host.file("/var/lib/inferops-serving/node.lock").exists
