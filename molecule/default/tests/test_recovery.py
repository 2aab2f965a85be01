"""Every part of the serving path comes back by itself after a crash or a reboot, without a deploy.

Each test kills a process with SIGKILL (as a crash would) or restarts a lab host's container (a
reboot: systemd shuts down, /run and /tmp are emptied, systemd boots again), then times how long
it takes from the fault (the kill, the reboot command) until the part serves again, and prints the
figure: a reboot's shutdown counts, so a reboot is not reported faster than a crash. The bounds are generous on purpose:
they catch a part that does not come back, while the printed figures are what the README states.
Every test runs under load: a client sends chat requests to the GPU node's server from the
controller throughout, and a part that serves counts as back only once the client's requests
succeed again.
Runs after the checks that read the converged nodes and before test_redeploys.py.
"""
import json
import subprocess
import threading
import time
import urllib.request

import pytest
import testinfra

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY, container_address
from ansible_collections.inferops.serving.tests.utils.prometheus import active_targets_up

JOURNAL_UNITS = ["sglang", "prometheus-node-exporter", "prometheus"]
testinfra_hosts = ["lab-default"]
PROMETHEUS_HOST = "lab-default-prom"
BOUND = 120


class Clients:
    """One client after another, each a short chat request to the GPU node's server; remembers
    when each answer arrived and whether it succeeded."""

    def __init__(self, url):
        self.url = url
        self.answers = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _request(self):
        body = json.dumps({"model": "glm-5", "max_tokens": 4,
                           "messages": [{"role": "user", "content": "Say hi."}]}).encode()
        request = urllib.request.Request(self.url + "/v1/chat/completions", data=body, headers={
            "Content-Type": "application/json", "Authorization": "Bearer " + LAB_API_KEY})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status == 200 and bool(json.load(response)["choices"])

    def _run(self):
        while not self._stop.is_set():
            try:
                ok = self._request()
            except Exception:  # pylint: disable=broad-except  # a refused or dropped request is a failed one
                ok = False
            self.answers.append((time.monotonic(), ok))
            self._stop.wait(0.2)

    def served_since(self, moment):
        return any(ok for at, ok in self.answers if at > moment)

    def failed_since(self, moment):
        return sum(1 for at, ok in self.answers if at > moment and not ok)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(15)


@pytest.fixture(scope="module")
def clients():
    with Clients("http://%s:8000" % container_address("lab-default")) as load:
        deadline = time.monotonic() + BOUND
        while not load.served_since(0):
            assert time.monotonic() < deadline, "the server answers no client before the recovery tests"
            time.sleep(0.5)
        yield load


def _wait(what, ready, capsys, since):
    """Seconds from the fault at ``since`` (time.monotonic()) until ready() is true; fails after BOUND seconds."""
    start = since
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
    result = host.run("curl -sS -m 5 -H %s http://127.0.0.1:8000/v1/models", "Authorization: Bearer " + LAB_API_KEY)
    return result.rc == 0 and json.loads(result.stdout)["data"][0]["id"] == "glm-5"


def _kill(host, unit):
    """SIGKILL the unit's main process; its pid before, and when the kill was sent."""
    before = _main_pid(host, unit)
    killed = time.monotonic()
    host.check_output("systemctl kill --signal=SIGKILL --kill-whom=main %s", unit)
    return before, killed


def _reboot(container):
    """Reboot the lab host: when the reboot command was given (the clock starts there, before its shutdown)."""
    commanded = time.monotonic()
    subprocess.run(["docker", "restart", "--time", "60", container], check=True, capture_output=True)
    return commanded


def test_the_server_comes_back_after_a_crash(host, journal, clients, capsys):
    before, killed = _kill(host, "sglang")
    _wait("sglang.service after SIGKILL",
          lambda: _main_pid(host, "sglang") not in (before, "0") and _serves(host) and clients.served_since(killed),
          capsys, since=killed)
    with capsys.disabled():
        print("[recovery] requests that failed meanwhile: %d" % clients.failed_since(killed))


def test_the_node_exporter_comes_back_after_a_crash_with_the_gpu_metrics(host, journal, clients, capsys):
    before, killed = _kill(host, "prometheus-node-exporter")
    _wait("prometheus-node-exporter.service after SIGKILL",
          lambda: _main_pid(host, "prometheus-node-exporter") not in (before, "0")
          and "inferops_gpu_" in host.check_output("curl -fsS -m 5 http://127.0.0.1:9100/metrics"), capsys, since=killed)


def test_prometheus_comes_back_after_a_crash_and_scrapes_again(journal, clients, capsys):
    prometheus = testinfra.get_host("docker://" + PROMETHEUS_HOST)
    before, killed = _kill(prometheus, "prometheus")
    _wait("prometheus.service after SIGKILL",
          lambda: _main_pid(prometheus, "prometheus") not in (before, "0") and active_targets_up(prometheus),
          capsys, since=killed)


def test_the_gpu_node_serves_again_after_a_reboot(host, journal, clients, capsys):
    # A container shares the host's kernel (and boot id): the server's start time tells the boots apart.
    started = host.check_output("systemctl show -p ActiveEnterTimestamp sglang")
    commanded = _reboot("lab-default")
    # An answer counts only once the reboot's shutdown is over; the time counts from the command.
    rebooted = time.monotonic()
    _wait("the GPU node after a reboot (server, GPU metrics)",
          lambda: host.check_output("systemctl show -p ActiveEnterTimestamp sglang") != started and _serves(host)
          and "inferops_gpu_" in host.check_output("curl -fsS -m 5 http://127.0.0.1:9100/metrics")
          and clients.served_since(rebooted), capsys, since=commanded)
    with capsys.disabled():
        print("[recovery] requests that failed meanwhile: %d" % clients.failed_since(rebooted))


def test_the_monitoring_host_scrapes_again_after_a_reboot(journal, clients, capsys):
    prometheus = testinfra.get_host("docker://" + PROMETHEUS_HOST)
    started = prometheus.check_output("systemctl show -p ActiveEnterTimestamp prometheus")
    commanded = _reboot(PROMETHEUS_HOST)
    _wait("the monitoring host after a reboot (Prometheus scraping every target)",
          lambda: prometheus.check_output("systemctl show -p ActiveEnterTimestamp prometheus") != started
          and prometheus.service("prometheus-alertmanager").is_running and active_targets_up(prometheus), capsys,
          since=commanded)
