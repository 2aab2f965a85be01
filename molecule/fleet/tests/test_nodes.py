# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every serving node ends on the changed argument and answers for its model."""

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY, container_address

testinfra_hosts = ["ansible://fleet-node-1", "ansible://fleet-node-2", "ansible://fleet-node-3"]


def test_node_runs_the_new_argument(host):
    unit = host.file("/etc/systemd/system/sglang.service").content_string
    assert "--max-running-requests 512" in unit
    assert "--enable-metrics" in unit
    assert host.service("sglang").is_running


def test_node_reports_its_requests(host):
    metrics = host.run("curl -sf -H 'Authorization: Bearer %s' http://127.0.0.1:8000/metrics" % LAB_API_KEY)
    assert metrics.rc == 0 and "sglang:num_running_reqs" in metrics.stdout


def test_replica_ranks(host):
    name = host.backend.get_hostname()
    unit = host.file("/etc/systemd/system/sglang.service").content_string
    if name == "fleet-node-1":
        assert "--nnodes" not in unit
        return
    first = container_address("fleet-node-2")
    rank = {"fleet-node-2": 0, "fleet-node-3": 1}[name]
    assert "--nnodes 2" in unit
    assert "--node-rank %d" % rank in unit
    assert "--dist-init-addr %s:20000" % first in unit
