# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an operator does to the served node and sees in Prometheus, read through its HTTP API on the
monitoring node: every target up, the token counter grown by at least the tokens a benchmark
generated, that benchmark's throughput as the node's baseline, the server-down alert firing when the
server stops and clearing after a deploy.

Each step is the command the operator types (`ansible-playbook playbooks/benchmark.yml -l gpu-node`,
then deploy.yml), read as data. The file runs first among the scenario's tests (pytest takes the
files by name) and ends with the node deployed again, serving as the converge left it; the checks
after it read the baseline its benchmark recorded (the GPU collector's file, the dashboard).
"""
import os

import pytest
import testinfra

from ansible_collections.inferops.serving.tests.utils.lab import LAB_NODE_VARS, inventory_vars
from ansible_collections.inferops.serving.tests.utils.playbook import run_scenario_playbook
from ansible_collections.inferops.serving.tests.utils.prometheus import active_targets_up, api
from ansible_collections.inferops.serving.tests.utils.wait import until

testinfra_hosts = ["lab-default-prom"]
GPU_NODE = "lab-default"
TOKENS = 'sum({__name__=~"sglang[:_]generation_tokens_total", node="%s"})' % GPU_NODE
BASELINE = 'inferops_sglang_baseline_output_throughput_tokens_per_second{node="%s"}' % GPU_NODE


@pytest.fixture(scope="module")
def gpu_node():
    return testinfra.get_host("ansible://%s?ansible_inventory=%s" % (GPU_NODE, os.environ["MOLECULE_INVENTORY_FILE"]))


def _values(host, query):
    """The values of the samples QUERY answers on HOST's Prometheus (none while it has no series)."""
    return [float(sample["value"][1]) for sample in api(host, "/query", query)["data"]["result"]]


def _server_down_alerts(host):
    return [alert for alert in api(host, "/alerts")["data"]["alerts"]
            if alert["labels"]["alertname"] == "SGLangServerDown" and alert["labels"].get("node") == GPU_NODE]


def test_every_target_is_up_the_servers_the_node_exporters_and_prometheus(host):
    until("four targets, all up",
          lambda: len(api(host, "/targets?state=active")["data"]["activeTargets"]) == 4 and active_targets_up(host))


def test_a_benchmark_grows_the_token_counter_and_becomes_the_nodes_baseline(host):
    before = until("the node's token counter", lambda: _values(host, TOKENS))[0]
    run = run_scenario_playbook("playbooks/benchmark.yml", "-l", GPU_NODE)
    assert run.returncode == 0, run.summary
    benchmark = [result["benchmark"] for name, result in run.tasks(GPU_NODE).items() if " : Benchmark the server" in name]
    assert benchmark and benchmark[0]["output_throughput"] > 0, run.summary

    lab = inventory_vars(LAB_NODE_VARS)
    generated = lab["serving_benchmark_num_prompts"] * lab["serving_benchmark_output_len"]
    until("the counter grown by %d tokens from %s" % (generated, before),
          lambda: _values(host, TOKENS)[0] - before >= generated)
    until("the baseline at the benchmark's %s output tok/s" % benchmark[0]["output_throughput"],
          lambda: _values(host, BASELINE) == [float(benchmark[0]["output_throughput"])])


def test_the_server_down_alert_fires_when_the_server_stops_and_clears_after_a_deploy(host, gpu_node):
    gpu_node.check_output("systemctl stop sglang.service")
    until("a firing SGLangServerDown alert for %s" % GPU_NODE,
          lambda: [alert for alert in _server_down_alerts(host) if alert["state"] == "firing"])
    run = run_scenario_playbook("deploy.yml", "-l", GPU_NODE)
    assert run.returncode == 0, run.summary
    until("no SGLangServerDown alert for %s" % GPU_NODE, lambda: not _server_down_alerts(host))
