# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving node: metrics on by default, the node exporter and the GPU textfile collector."""

# A failed test prints their journal (conftest.py).
JOURNAL_UNITS = ["inferops-gpu-metrics", "prometheus-node-exporter"]
testinfra_hosts = ["lab-default"]

PROM_FILE = "/var/lib/prometheus/node-exporter/inferops_gpu.prom"


def test_the_server_serves_metrics_without_the_api_key(host):
    unit = host.file("/etc/systemd/system/sglang.service").content_string
    assert "--enable-metrics" in [line for line in unit.splitlines() if line.startswith("ExecStart=")][0].split()
    metrics = host.run("curl -fsS http://127.0.0.1:8000/metrics")
    assert metrics.rc == 0
    assert "# TYPE sglang:generation_tokens_total counter" in metrics.stdout
    assert "# TYPE sglang:time_to_first_token_seconds histogram" in metrics.stdout
    # The API itself still wants the key.
    assert host.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/v1/models").stdout == "401"


def test_the_node_exporter_listens_for_prometheus_and_reads_the_textfile(host, journal):
    assert host.service("prometheus-node-exporter").is_running
    assert "tcp://0.0.0.0:9100" in host.socket.get_listening_sockets()
    metrics = host.run("curl -fsS http://127.0.0.1:9100/metrics").stdout
    assert "node_textfile_scrape_error 0" in metrics.splitlines()
    assert 'inferops_gpu_power_limit_watts{bus_id="0000:08:00.0",gpu="7",name="NVIDIA RTX PRO 6000 Blackwell Server Edition"} 600' \
        in metrics.splitlines()


def test_the_collector_runs_on_a_timer_and_writes_atomically(host, journal):
    assert host.service("inferops-gpu-metrics.timer").is_running
    assert host.service("inferops-gpu-metrics.timer").is_enabled
    prom = host.file(PROM_FILE)
    assert prom.user == "root" and prom.mode == 0o644
    text = prom.content_string
    assert "inferops_gpu_query_success 1" in text.splitlines()
    assert "inferops_sglang_health_up 1" in text.splitlines()
    assert "inferops_sglang_baseline_output_throughput_tokens_per_second" in text
    # No temporary file is left behind for the node exporter to trip over.
    assert host.run("ls -A /var/lib/prometheus/node-exporter").stdout.split() == ["inferops_gpu.prom"]
