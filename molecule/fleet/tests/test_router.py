# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router after the rollouts: hardened, keyed, routing to every node again."""

import json

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY, container_address, inventory_vars

testinfra_hosts = ["ansible://fleet-router"]

UNIT = "/etc/systemd/system/sglang-router.service"
ENV_FILE = "/etc/sglang-router/sglang-router.env"
CLIENT_KEY = inventory_vars("molecule/fleet/inventory/group_vars/sglang_routers/fleet.yml")["sglang_router_api_key"]


def _journal(host):
    return host.run("journalctl -u sglang-router.service --no-pager -o cat").stdout


def test_router_runs_the_pinned_release_under_its_own_user(host):
    service = host.service("sglang-router")
    assert service.is_running and service.is_enabled, _journal(host)[-3000:]
    version = host.run("/opt/sglang-router/venv/bin/python -m pip show sglang-router").stdout
    assert "Version: 0.3.2" in version
    user = host.run("ps -o user= -C sglang::router").stdout.split() or host.run(
        "systemctl show -p User --value sglang-router.service").stdout.split()
    assert user[0] == "sglang-router"


def test_router_is_sandboxed(host):
    score = host.run("systemd-analyze security sglang-router.service --no-pager | tail -1").stdout
    # "→ Overall exposure level for sglang-router.service: 2.1 OK"
    exposure = float(score.split(":")[1].split()[0])
    assert exposure <= 3.0, score


def test_keys_are_only_in_the_root_only_environment_file(host):
    env = host.file(ENV_FILE)
    assert env.user == "root" and env.mode == 0o600
    unit = host.file(UNIT).content_string
    assert CLIENT_KEY not in unit and LAB_API_KEY not in unit
    pid = host.run("systemctl show -p MainPID --value sglang-router.service").stdout.strip()
    cmdline = host.run("tr '\\0' ' ' < /proc/%s/cmdline" % pid).stdout
    environ = host.run("tr '\\0' '\\n' < /proc/%s/environ" % pid).stdout
    assert CLIENT_KEY not in cmdline and CLIENT_KEY not in environ
    journal = _journal(host)
    assert CLIENT_KEY not in journal and LAB_API_KEY not in journal


def test_clients_need_the_key(host):
    without = host.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/workers").stdout
    assert without == "401"


def test_router_routes_to_node_1_and_to_rank_0_of_the_replica(host):
    answer = host.run("curl -sf -H 'Authorization: Bearer %s' http://127.0.0.1:30000/workers" % CLIENT_KEY)
    assert answer.rc == 0, answer.stderr
    workers = json.loads(answer.stdout)["workers"]
    assert all(w["is_healthy"] for w in workers), workers
    assert {w["model_id"] for w in workers} == {"glm-5"}
    expected = {"http://%s:8000" % container_address(name) for name in ("fleet-node-1", "fleet-node-2")}
    assert {w["url"] for w in workers} == expected
    ready = host.run("curl -s http://127.0.0.1:30000/readiness").stdout
    assert json.loads(ready)["healthy_workers"] == 2


def test_prometheus_listener(host):
    metrics = host.run("curl -sf http://127.0.0.1:29000/metrics")
    assert metrics.rc == 0 and "smg_" in metrics.stdout
