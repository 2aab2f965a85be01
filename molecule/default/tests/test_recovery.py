"""Every part of the serving path comes back by itself after a crash or a reboot, without a deploy.

Each test kills a process with SIGKILL (as a crash would) or restarts a lab host's container (a
reboot: systemd shuts down, /run and /tmp are emptied, systemd boots again), then times how long
it takes until the part serves again, and prints the figure. The bounds are generous on purpose:
they catch a part that does not come back, while the printed figures are what the README states.
Runs after the checks that read the converged nodes and before test_redeploys.py.
"""
import json
import subprocess
import time

import testinfra

JOURNAL_UNITS = ["sglang", "prometheus-node-exporter", "prometheus"]
testinfra_hosts = ["lab-default"]
API_KEY = "lab-api-key-not-a-secret"  # the lab inventory's made-up key
PROMETHEUS_HOST = "lab-default-prom"
BOUND = 120


def _wait(what, ready, capsys):
    """Seconds until ready() is true; fails after BOUND seconds."""
    start = time.monotonic()
    while True:
        try:
            if ready():
                break
        except (AssertionError, RuntimeError, ValueError, KeyError, IndexError):
            pass
        assert time.monotonic() - start < BOUND, "%s did not come back within %d s" % (what, BOUND)
        time.sleep(0.5)
    took = time.monotonic() - start
    with capsys.disabled():
        print("\n[recovery] %s: back in %.1f s" % (what, took))
    return took


def _main_pid(host, unit):
    return host.check_output("systemctl show -p MainPID --value %s", unit)


def _serves(host):
    result = host.run("curl -sS -m 5 -H %s http://127.0.0.1:8000/v1/models", "Authorization: Bearer " + API_KEY)
    return result.rc == 0 and json.loads(result.stdout)["data"][0]["id"] == "glm-5"


def _scrapes_the_gpu_node(prometheus):
    result = prometheus.run("curl -fsS -m 5 -G http://127.0.0.1:9090/api/v1/targets --data-urlencode state=active")
    targets = json.loads(result.stdout)["data"]["activeTargets"]
    return bool(targets) and all(target["health"] == "up" for target in targets)


def _kill(host, unit):
    before = _main_pid(host, unit)
    host.check_output("systemctl kill --signal=SIGKILL --kill-whom=main %s", unit)
    return before


def _reboot(container):
    subprocess.run(["docker", "restart", "--time", "60", container], check=True, capture_output=True)


def test_the_server_comes_back_after_a_crash(host, journal, capsys):
    before = _kill(host, "sglang")
    _wait("sglang.service after SIGKILL",
          lambda: _main_pid(host, "sglang") not in (before, "0") and _serves(host), capsys)


def test_the_node_exporter_comes_back_after_a_crash_with_the_gpu_metrics(host, journal, capsys):
    before = _kill(host, "prometheus-node-exporter")
    _wait("prometheus-node-exporter.service after SIGKILL",
          lambda: _main_pid(host, "prometheus-node-exporter") not in (before, "0")
          and "inferops_gpu_" in host.check_output("curl -fsS -m 5 http://127.0.0.1:9100/metrics"), capsys)


def test_prometheus_comes_back_after_a_crash_and_scrapes_again(journal, capsys):
    prometheus = testinfra.get_host("docker://" + PROMETHEUS_HOST)
    before = _kill(prometheus, "prometheus")
    _wait("prometheus.service after SIGKILL",
          lambda: _main_pid(prometheus, "prometheus") not in (before, "0") and _scrapes_the_gpu_node(prometheus),
          capsys)


def test_the_gpu_node_serves_again_after_a_reboot(host, journal, capsys):
    # A container shares the host's kernel (and boot id): the server's start time tells the boots apart.
    started = host.check_output("systemctl show -p ActiveEnterTimestamp sglang")
    _reboot("lab-default")
    _wait("the GPU node after a reboot (server, GPU metrics)",
          lambda: host.check_output("systemctl show -p ActiveEnterTimestamp sglang") != started and _serves(host)
          and "inferops_gpu_" in host.check_output("curl -fsS -m 5 http://127.0.0.1:9100/metrics"), capsys)


def test_the_monitoring_host_scrapes_again_after_a_reboot(journal, capsys):
    prometheus = testinfra.get_host("docker://" + PROMETHEUS_HOST)
    started = prometheus.check_output("systemctl show -p ActiveEnterTimestamp prometheus")
    _reboot(PROMETHEUS_HOST)
    _wait("the monitoring host after a reboot (Prometheus scraping every target)",
          lambda: prometheus.check_output("systemctl show -p ActiveEnterTimestamp prometheus") != started
          and prometheus.service("prometheus-alertmanager").is_running and _scrapes_the_gpu_node(prometheus), capsys)
