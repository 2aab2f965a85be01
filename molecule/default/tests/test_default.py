"""What an operator expects of a node after `ansible-playbook deploy.yml -l gpu-node`."""
import json

import pytest

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY

# The serving node; the scenario's second node runs Prometheus (test_prometheus.py).
testinfra_hosts = ["lab-default"]
SERVER = "http://127.0.0.1:8000"


def _get(host, path, key=None):
    if key:
        return host.run("curl -sS -w '\\n%%{http_code}' -H %s %s", "Authorization: Bearer " + key, SERVER + path)
    return host.run("curl -sS -w '\\n%%{http_code}' %s", SERVER + path)


def _body_and_status(result):
    body, _sep, status = result.stdout.rpartition("\n")
    return body, int(status)


@pytest.fixture(autouse=True)
def journal_on_failure(host, request):
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(host.run("journalctl -u sglang -n 40 --no-pager").stdout)


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), host.run("systemctl --failed --no-pager").stdout


def test_every_gpu_is_visible_to_the_driver(host):
    listing = host.check_output("nvidia-smi -L")
    assert len([line for line in listing.splitlines() if line.startswith("GPU ")]) == 8


def test_cuda_12_8_is_on_the_login_path(host):
    assert "release 12.8" in host.check_output("bash -lc 'nvcc --version'")


def test_server_runs_as_the_service_user_and_survives_reboots(host):
    service = host.service("sglang")
    assert service.is_running
    assert service.is_enabled
    user = host.check_output("systemctl show -p User --value sglang")
    assert user == "sglang"


def test_server_is_healthy_and_serves_the_known_good_model(host):
    _body, status = _body_and_status(_get(host, "/health"))
    assert status == 200
    body, status = _body_and_status(_get(host, "/v1/models", key=LAB_API_KEY))
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "glm-5"


def test_server_refuses_requests_without_the_api_key(host):
    _body, status = _body_and_status(_get(host, "/v1/models"))
    assert status == 401


def test_unit_runs_the_baseline_arguments(host):
    unit = host.file("/etc/systemd/system/sglang.service").content_string
    assert "--tp-size 8" in unit
    assert "--moe-runner-backend flashinfer_cutlass" in unit
    assert "enable-flashinfer-allreduce-fusion" not in unit
    # The topology (P2P NS on every pair) adds what the inventory left unset.
    assert "--disable-custom-all-reduce" in unit
    assert LAB_API_KEY not in unit


def test_secrets_live_only_in_the_root_only_environment_file(host):
    env = host.file("/etc/sglang/sglang.env")
    assert env.user == "root"
    assert env.mode == 0o600
    assert LAB_API_KEY in env.content_string
    cmdlines = host.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
    assert LAB_API_KEY not in cmdlines


def test_installed_stack_is_pristine_against_pip_record(host):
    venv = host.check_output("ls -d /opt/sglang/venvs/0.5.9-*")
    python = venv + "/bin/python"
    for dist, version in (("sglang", "0.5.9"), ("flashinfer_python", "0.6.3")):
        out = host.check_output(
            "%s -c \"import importlib.metadata as m; print(m.version('%s'))\"", python, dist)
        assert out == version
    modified = host.check_output(
        "cd %s/lib/python3.11/site-packages && "
        "for rec in sglang-0.5.9.dist-info/RECORD flashinfer_python-0.6.3.dist-info/RECORD; do "
        "python3 -c \"import csv,hashlib,base64,sys\n"
        "for row in csv.reader(open(sys.argv[1])):\n"
        "  p,h=row[0],row[1]\n"
        "  if not h: continue\n"
        "  d=base64.urlsafe_b64encode(hashlib.sha256(open(p,'rb').read()).digest()).rstrip(b'=').decode()\n"
        "  print(p) if 'sha256='+d!=h else None\" $rec; done", venv)
    assert modified == ""


def test_history_records_the_deploy(host):
    lines = host.file("/var/lib/sglang/history.jsonl").content_string.splitlines()
    events = [json.loads(line)["event"] for line in lines if line.strip()]
    assert "deploy" in events
