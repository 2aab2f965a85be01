"""What an operator expects of a node after `ansible-playbook deploy.yml -l gpu-node`."""
import json
import os
import re
import subprocess
import threading
import time

import pytest

API_KEY = "lab-api-key-not-a-secret"  # the lab inventory's made-up key
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
    body, status = _body_and_status(_get(host, "/v1/models", key=API_KEY))
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
    assert API_KEY not in unit


def test_secrets_live_only_in_the_root_only_environment_file(host):
    env = host.file("/etc/sglang/sglang.env")
    assert env.user == "root"
    assert env.mode == 0o600
    assert API_KEY in env.content_string
    cmdlines = host.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
    assert API_KEY not in cmdlines


def test_installed_stack_is_pristine_against_pip_record(host):
    python = "/opt/sglang/venv/bin/python"
    for dist, version in (("sglang", "0.5.9"), ("flashinfer_python", "0.6.3")):
        out = host.check_output(
            "%s -c \"import importlib.metadata as m; print(m.version('%s'))\"", python, dist)
        assert out == version
    modified = host.check_output(
        "cd /opt/sglang/venv/lib/python3.11/site-packages && "
        "for rec in sglang-0.5.9.dist-info/RECORD flashinfer_python-0.6.3.dist-info/RECORD; do "
        "python3 -c \"import csv,hashlib,base64,sys\n"
        "for row in csv.reader(open(sys.argv[1])):\n"
        "  p,h=row[0],row[1]\n"
        "  if not h: continue\n"
        "  d=base64.urlsafe_b64encode(hashlib.sha256(open(p,'rb').read()).digest()).rstrip(b'=').decode()\n"
        "  print(p) if 'sha256='+d!=h else None\" $rec; done")
    assert modified == ""


def test_history_records_the_deploy(host):
    lines = host.file("/var/lib/sglang/history.jsonl").content_string.splitlines()
    events = [json.loads(line)["event"] for line in lines if line.strip()]
    assert "deploy" in events


def _deploy(*extra):
    """(rc, output, finished at) of deploy.yml against this scenario's node."""
    command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
               os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "deploy.yml")] + list(extra)
    proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    return proc.returncode, proc.stdout, time.monotonic()


def _served_name(host):
    result = host.run("curl -sS -H %s %s", "Authorization: Bearer " + API_KEY, SERVER + "/v1/models")
    return json.loads(result.stdout)["data"][0]["id"]


def test_a_hand_edit_of_the_unit_is_found_by_the_plan_and_put_back(host):
    unit = "/etc/systemd/system/sglang.service"
    before = host.file(unit).content_string
    host.run("sed -i 's/^Restart=.*/Restart=no/' %s", unit)
    rc, output, _finished = _deploy()
    assert rc == 0, output[-3000:]
    assert "would change: %s changed since the last deploy" % unit in " ".join(output.split()), output[-3000:]
    assert host.file(unit).content_string == before
    rc, output, _finished = _deploy()
    assert rc == 0 and re.search(r"changed=0\s+unreachable=0\s+failed=0", output), output[-3000:]


# Last: it leaves the node serving another name until the final deploy puts the inventory's back.
def test_two_deploys_started_together_end_serving_what_the_last_one_to_finish_reported(host):
    results = {}

    def deploy(name):
        results[name] = _deploy("-e", json.dumps({"sglang_server_extra_args": {"served-model-name": name},
                                                  "serving_node_lock_wait": 600}))

    threads = [threading.Thread(target=deploy, args=(name,)) for name in ("run-a", "run-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, (rc, output, _finished) in results.items():
        assert rc == 0, (name, output[-3000:])
    last = max(results, key=lambda name: results[name][2])
    assert _served_name(host) == last
    assert any("s for the node lock of" in " ".join(output.split()) for _rc, output, _finished in results.values()), \
        "neither run waited for the other"
    rc, output, _finished = _deploy()
    assert rc == 0, output[-3000:]
