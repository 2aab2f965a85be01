# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every serving node ends on the changed argument and answers for its model."""

testinfra_hosts = ["ansible://fleet-node-1", "ansible://fleet-node-2", "ansible://fleet-node-3"]


def test_node_runs_the_new_argument(host):
    unit = host.file("/etc/systemd/system/sglang.service").content_string
    assert "--max-running-requests 512" in unit
    assert "--enable-metrics" in unit
    assert host.service("sglang").is_running


def test_node_reports_its_requests(host):
    metrics = host.run("curl -sf -H 'Authorization: Bearer lab-api-key-not-a-secret' http://127.0.0.1:8000/metrics")
    assert metrics.rc == 0 and "sglang:num_running_reqs" in metrics.stdout
