# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""State of the sglang_server role on the lab node, and what reruns of converge do to it.

The tests run in file order: the later ones rerun converge.yml with changed variables and
each one leaves the node serving the converge configuration again.
"""

import json
import shlex
import time

import pytest
from lab_playbooks import changed, run_playbook, server_handlers_ran  # pylint: disable=import-error  # the tests folder, on pytest's path

API_KEY = "lab-secret-do-not-log-7f3a9c"
HF_TOKEN = "hf_labTokenDoNotLog0123456789"
SECRETS = (API_KEY, HF_TOKEN)
UNIT = "/etc/systemd/system/sglang.service"
ENV_FILE = "/etc/sglang/sglang.env"
LAUNCHER_MODULES = "/usr/local/libexec/sglang_launch"
SIM_ENV = {"PYTHONPATH": "/opt/inferops-lab/sglang_sim", "INFEROPS_LAB_SIM_LOAD_SECONDS": "2"}
# Where the lab's nvidia-smi reads planted GPU faults, and the lab's kernel log (sim/nvidia-smi).
GPU_FAULTS = "/run/inferops-lab/gpu-faults.json"
KERNEL_LOG = "/run/inferops-lab/kernel.log"
# converge.yml: the venv's kernel cache, and sglang_server_stop_timeout 8 plus the server's 25 s shutdown.
KERNEL_CACHE = "/var/cache/sglang/lab-venv"
STOP_BOUND_S = 33


def converge(extra_vars=None):
    """Run the scenario's converge playbook again, as a PlaybookRun."""
    return run_playbook("converge.yml", extra_vars)


def service_state(host):
    out = host.check_output("systemctl show sglang.service --property=MainPID,ActiveEnterTimestampMonotonic,ActiveState")
    return dict(line.split("=", 1) for line in out.splitlines())


def curl(host, path, key=None):
    auth = "-H 'Authorization: Bearer %s' " % key if key else ""
    return host.run("curl -s -w '\\n%%{http_code}' %shttp://127.0.0.1:8000%s" % (auth, path))


def journal(host):
    return host.run("journalctl -u sglang.service -n 40 --no-pager").stdout


def assert_serving(host):
    models = curl(host, "/v1/models", API_KEY)
    body, status = models.stdout.rsplit("\n", 1)
    assert status == "200", journal(host)
    assert json.loads(body)["data"][0]["id"] == "glm-5"


def test_unit_file_content_and_permissions(host):
    unit = host.file(UNIT)
    assert unit.user == "root" and unit.group == "root" and unit.mode == 0o644
    text = unit.content_string
    assert "Ansible managed" in text.splitlines()[1]
    for line in ("User=sglang", "Group=sglang", "EnvironmentFile=/etc/sglang/sglang.env", "Restart=on-failure",
                 "KillMode=mixed", "LimitMEMLOCK=infinity", "LimitNOFILE=1048576", "TimeoutStartSec=120",
                 "NoNewPrivileges=yes", "ProtectSystem=strict", "DevicePolicy=closed",
                 "DeviceAllow=char-nvidia-uvm rw", "CapabilityBoundingSet=", "WantedBy=multi-user.target"):
        assert line in text.splitlines(), line
    # CUDA and the JIT compilers need writable+executable memory.
    assert not [line for line in text.splitlines() if line.startswith("MemoryDenyWriteExecute=")]
    exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=")][0]
    assert exec_start.startswith("ExecStart=/opt/sglang/venv/bin/python /usr/local/libexec/sglang-launch run "
                                 "inferops_lab_sglang_sim.launch_server ")
    words = exec_start.split()
    assert words[words.index("--model-path") + 1] == "lukealonso/GLM-5-NVFP4"
    assert "--tp-size 8" in exec_start and "--disable-cuda-graph" in exec_start
    # Filled in from the topology facts: no P2P between the lab's GPUs.
    assert "--disable-custom-all-reduce" in words
    for secret in SECRETS:
        assert secret not in text


def test_environment_file_is_private_and_holds_env_and_secrets(host):
    env = host.file(ENV_FILE)
    assert env.user == "root" and env.group == "root" and env.mode == 0o600
    assert host.file("/etc/sglang").mode == 0o700
    text = env.content_string
    for line in ('NCCL_IB_DISABLE="1"', 'NCCL_P2P_LEVEL="5"', 'NCCL_MIN_NCHANNELS="8"', 'OMP_NUM_THREADS="8"',
                 'SAFETENSORS_FAST_GPU="1"', 'HF_HOME="/var/lib/sglang/huggingface"',
                 'SGLANG_API_KEY="%s"' % API_KEY, 'HF_TOKEN="%s"' % HF_TOKEN):
        assert line in text.splitlines(), line


def test_the_hf_token_reaches_the_server_as_a_file_of_its_own(host):
    # The launcher moves the token from its environment into a 0600 file of the service user in
    # the unit's private /tmp and gives the server (and its workers) only its path, HF_TOKEN_PATH,
    # which huggingface_hub reads. Seen here from outside: systemd keeps that /tmp under
    # /tmp/systemd-private-*-sglang.service-*/ (root only).
    pid = service_state(host)["MainPID"]
    assert b"HF_TOKEN=" not in host.file("/proc/%s/environ" % pid).content
    files = host.check_output("ls /tmp/systemd-private-*-sglang.service-*/tmp/sglang-launch-*.secret").split()
    assert len(files) == 1, files
    assert host.check_output("stat -c '%%U %%a' %s", files[0]) == "sglang 600"
    assert host.file(files[0]).content_string == HF_TOKEN
    assert host.check_output("stat -c '%%U %%a' %s", files[0].split("/tmp/sglang-launch-")[0]) == "root 700"


def test_unit_verifies_clean(host):
    result = host.run("systemd-analyze verify %s", UNIT)
    assert result.rc == 0 and result.stderr.strip() == "", result.stderr
    security = host.run("systemd-analyze security sglang.service --no-pager")
    # "→ Overall exposure level for sglang.service: 3.0 OK": what roles/sglang_server/README.md
    # states for the defaults (no system call filter, /dev/nvidia* and W+X memory left open).
    verdict = security.stdout.splitlines()[-1]
    assert "Overall exposure level for sglang.service" in verdict, security.stdout
    exposure = float(verdict.split(":")[1].split()[0])
    assert exposure <= 3.0, verdict


def test_service_active_enabled_and_not_root(host):
    service = host.service("sglang")
    assert service.is_running, journal(host)
    assert service.is_enabled
    pid = service_state(host)["MainPID"]
    assert host.check_output("ps -o user= -p %s", pid).strip() == "sglang"


def test_no_secret_in_any_command_line_environment_or_the_journal(host):
    cmdlines = host.check_output("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
    environments = host.check_output("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' '")
    log = host.check_output("journalctl -u sglang.service --no-pager")
    for secret in SECRETS:
        assert secret not in cmdlines
        assert secret not in environments
        assert secret not in log


def test_port_answers_and_requires_the_api_key(host):
    assert host.socket("tcp://0.0.0.0:8000").is_listening
    assert curl(host, "/health").stdout.endswith("200")
    assert curl(host, "/v1/models").stdout.endswith("401")
    assert_serving(host)


def server_info(host):
    return json.loads(curl(host, "/server_info", API_KEY).stdout.rsplit("\n", 1)[0])


def timed_restart(host):
    """Seconds `systemctl restart` took: the stop (waiting for the requests) and the start until /health."""
    # A restart by hand counts against the unit's StartLimitBurst, as a crash does.
    host.run_expect([0], "systemctl reset-failed sglang.service")
    started = time.monotonic()
    host.run_expect([0], "systemctl restart sglang.service")
    return time.monotonic() - started


def start_stream(host, name, max_tokens):
    """A streaming chat request from the node, in the background, its events written to /root/NAME.out."""
    body = json.dumps({"model": "glm-5", "stream": True, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "Write a long story."}]})
    request = ("curl -sN -H %s -H 'Content-Type: application/json' -d %s http://127.0.0.1:8000/v1/chat/completions"
               " > /root/%s.out 2>&1" % (shlex.quote("Authorization: Bearer " + API_KEY), shlex.quote(body), name))
    # Detached from the connection's pipes, so that this returns while the stream runs.
    host.run_expect([0], "rm -f /root/%s.out && setsid -f sh -c %s </dev/null >/dev/null 2>&1"
                    % (name, shlex.quote(request)))


def stream_output(host, name):
    return host.file("/root/%s.out" % name).content_string


def wait_until_streaming(host, names, timeout=10):
    deadline = time.monotonic() + timeout
    while not all("data: " in stream_output(host, name) for name in names):
        assert time.monotonic() < deadline, [stream_output(host, name)[-300:] for name in names]
        time.sleep(0.2)


def test_compiled_kernels_survive_a_restart_in_the_venvs_kernel_cache(host):
    text = host.file(UNIT).content_string
    read_write = [line for line in text.splitlines() if line.startswith("ReadWritePaths=")][0].split("=", 1)[1].split()
    assert KERNEL_CACHE in read_write
    assert "SGLANG_CACHE_DIR=\"%s\"" % KERNEL_CACHE in host.file(ENV_FILE).content_string
    assert server_info(host)["kernel_cache"] in ("compiled", "reused")
    timed_restart(host)
    # The simulator compiles its stand-in kernels only when the cache does not hold them.
    assert server_info(host)["kernel_cache"] == "reused", journal(host)
    kernel = host.file(KERNEL_CACHE + "/triton/inferops-lab-sim/kernel.cubin")
    assert kernel.exists and kernel.user == "sglang"


def test_a_restart_lets_streaming_requests_finish_within_the_stop_bound(host):
    assert "TimeoutStopSec=%d" % STOP_BOUND_S in host.file(UNIT).content_string.splitlines()
    # Three streams that share the simulated rate for about 5 s: the restart comes while they run.
    max_tokens = int(server_info(host)["rate_tok_s"] * 5 / 3)
    names = ["stream-%d" % number for number in range(3)]
    for name in names:
        start_stream(host, name, max_tokens)
    wait_until_streaming(host, names)
    assert not any("[DONE]" in stream_output(host, name) for name in names)
    took = timed_restart(host)
    for name in names:
        output = stream_output(host, name)
        assert output.rstrip().endswith("data: [DONE]"), output[-500:]
        assert '"finish_reason": "length"' in output
    assert 2 < took < STOP_BOUND_S, journal(host)
    assert "Draining requests" in journal(host)
    assert_serving(host)


def test_a_request_that_outlives_the_stop_bound_is_cut_when_the_bound_ends(host):
    # About 60 s of tokens: longer than the 33 s systemd allows the stop.
    start_stream(host, "outlives", int(server_info(host)["rate_tok_s"] * 60))
    wait_until_streaming(host, ["outlives"])
    took = timed_restart(host)
    output = stream_output(host, "outlives")
    assert "[DONE]" not in output and "data: " in output
    assert STOP_BOUND_S <= took < STOP_BOUND_S + 20, journal(host)
    assert "State 'stop-sigterm' timed out" in host.run("journalctl -u sglang.service -n 200 --no-pager").stdout
    assert_serving(host)


def test_noop_rerun_changes_nothing_and_keeps_the_server(host):
    before = service_state(host)
    run = converge()
    assert run.returncode == 0, run.summary
    assert changed(run) == 0, run.summary
    after = service_state(host)
    assert (after["MainPID"], after["ActiveEnterTimestampMonotonic"]) == (
        before["MainPID"], before["ActiveEnterTimestampMonotonic"])
    for secret in SECRETS:
        assert secret not in run.output


def test_argument_change_restarts_the_server(host):
    before = service_state(host)
    run = converge({"sglang_server_extra_args": {"enable-flashinfer-allreduce-fusion": True}})
    assert run.returncode == 0, run.summary
    assert "inferops.serving.sglang_server : Restart sglang server" in server_handlers_ran(run), run.summary
    after = service_state(host)
    assert after["MainPID"] != before["MainPID"]
    assert after["ActiveState"] == "active"
    assert "--enable-flashinfer-allreduce-fusion" in host.file(UNIT).content_string
    # The simulator takes the seed's measurement for fusion on a topology without P2P.
    info = json.loads(curl(host, "/server_info", API_KEY).stdout.rsplit("\n", 1)[0])
    assert info["rate_tok_s"] == 236.0 and info["p2p"] is False
    for secret in SECRETS:
        assert secret not in run.output

    run = converge()
    assert run.returncode == 0, run.summary
    assert service_state(host)["MainPID"] != after["MainPID"]
    assert "--enable-flashinfer-allreduce-fusion" not in host.file(UNIT).content_string


def test_hand_edits_of_the_unit_the_environment_file_and_the_launcher_are_found_and_repaired(host):
    unit, env_file = host.file(UNIT).content_string, host.file(ENV_FILE).content_string
    launcher_module = host.file(LAUNCHER_MODULES + "/wait_healthy.py").content_string
    host.run("sed -i 's/^LimitNOFILE=.*/LimitNOFILE=1024/' %s && echo 'NCCL_DEBUG=\"TRACE\"' >> %s" % (UNIT, ENV_FILE))
    host.run("echo '# edited' >> %s/wait_healthy.py && chmod 0600 %s/secret_names.py" % (LAUNCHER_MODULES, LAUNCHER_MODULES))
    assert host.file(UNIT).content_string != unit and host.file(ENV_FILE).content_string != env_file
    before = service_state(host)
    run = converge()
    assert run.returncode == 0, run.summary
    assert changed(run) > 0, run.summary
    assert host.file(UNIT).content_string == unit
    assert host.file(ENV_FILE).content_string == env_file
    assert host.file(LAUNCHER_MODULES + "/wait_healthy.py").content_string == launcher_module
    assert host.file(LAUNCHER_MODULES + "/secret_names.py").mode == 0o644
    # The repaired configuration is what runs: the server restarted and answers.
    assert service_state(host)["MainPID"] != before["MainPID"]
    assert_serving(host)
    for secret in SECRETS:
        assert secret not in run.output


def test_invalid_flag_value_fails_before_restart_and_old_server_keeps_serving(host):
    before = service_state(host)
    unit_before = host.file(UNIT).content_string
    env_before = host.file(ENV_FILE).sha256sum
    run = converge({"sglang_server_extra_args": {"attention-backend": "flashinfer2", "max-running-requests": 64}})
    assert run.returncode != 0, run.summary
    assert run.said("--attention-backend=flashinfer2 is not valid; allowed:"), run.summary
    assert server_handlers_ran(run) == [], run.summary
    assert service_state(host) == before
    assert host.file(UNIT).content_string == unit_before
    assert host.file(ENV_FILE).sha256sum == env_before
    assert_serving(host)
    for secret in SECRETS:
        assert secret not in run.output


def first_failure(run):
    """The first failed task's message, on one line."""
    assert run.failures(), run.summary
    return " ".join(run.failures()[0].split())


# Every class of fault the gate judges, planted on the node in the formats of the real tools (the
# lab's nvidia-smi -q -x, the kernel log's Xid lines), read by the real module on the node: the
# verdict and the step it names. The gate's effect on a converge is the test below.
GPU_FAULT_CLASSES = [
    ({"2": {"recovery_action": "Reset"}}, None, "reset", "GPU 2 recovery action Reset"),
    ({"2": {"recovery_action": "Reboot"}}, None, "reboot", "GPU 2 recovery action Reboot"),
    ({"4": {"row_remapping": "pending"}}, None, "reset", "GPU 4 row remapping pending"),
    ({"4": {"row_remapping": "failed"}}, None, "replace", "GPU 4 row remapping failed"),
    ({"5": {"ecc_uncorrectable": 2}}, None, "reset", "GPU 5 2 uncorrectable ECC"),
    ({"6": {"retired_pages_pending": True}}, None, "reset", "GPU 6 page retirement pending"),
    ({"7": {"missing": True}}, None, "reboot", "7 of 8 GPUs"),
    ({}, "[ 812.5] NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=python3", "reset", "GPU 2 Xid 48"),
    ({}, "[ 812.5] NVRM: Xid (PCI:0000:03:00): 79, pid=1, name=python3", "reboot", "GPU 2 Xid 79"),
    ({}, "[ 812.5] NVRM: Xid (PCI:0000:03:00): 95, pid=1, name=python3", "reset", "GPU 2 Xid 95"),
    ({}, "[ 812.5] NVRM: Xid (PCI:0000:03:00): 119, pid=1, name=python3", "reset", "GPU 2 Xid 119"),
    ({}, "[ 812.5] NVRM: Xid (PCI:0000:03:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot "
         "Required)", "reboot", "GPU 2 Xid 154"),
]


@pytest.mark.parametrize("faults, kernel_line, step, words", GPU_FAULT_CLASSES,
                         ids=[case[3] for case in GPU_FAULT_CLASSES])
def test_each_gpu_fault_class_is_judged_unfit_on_the_node(host, faults, kernel_line, step, words):
    host.run("printf '%%s' %s > %s", json.dumps(faults), GPU_FAULTS)
    if kernel_line:
        host.run("echo %s >> %s", kernel_line, KERNEL_LOG)
    try:
        verdict = host.ansible("inferops.serving.gpu_health",
                               "kernel_log_file=%s expected_gpu_count=8" % KERNEL_LOG, check=False)
    finally:
        host.run("rm -f %s && : > %s", GPU_FAULTS, KERNEL_LOG)
    assert verdict["healthy"] is False, verdict
    assert words in verdict["verdict"] + " " + " ".join(verdict["problems"]), verdict
    assert verdict["verdict"].startswith("unhealthy (%s)" % step), verdict["verdict"]
    healthy = host.ansible("inferops.serving.gpu_health", "kernel_log_file=%s expected_gpu_count=8" % KERNEL_LOG,
                           check=False)
    assert healthy["healthy"] is True, healthy


def test_unfit_gpus_stop_the_restart_until_the_fault_is_cleared(host):
    before = service_state(host)
    unit_before = host.file(UNIT).content_string
    # GPU 3 asks for a reset (nvidia-smi -q -x); GPU 1 fell off the bus (the kernel log, as the driver writes it).
    host.run("printf '%%s' '{\"3\": {\"recovery_action\": \"Reset\"}}' > %s", GPU_FAULTS)
    host.run("echo '[ 5120.118331] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.' >> %s", KERNEL_LOG)
    try:
        # A configuration change: without the gate, this run would restart the server.
        run = converge({"sglang_server_extra_args": {"max-running-requests": 512}})
    finally:
        host.run("rm -f %s && : > %s", GPU_FAULTS, KERNEL_LOG)
    assert run.returncode != 0, run.summary
    failure = first_failure(run)
    assert "GPU health gate: the GPUs of lab-sglang_server are not fit to serve" in failure, failure
    assert "unhealthy (reboot): GPU 1 Xid 79; GPU 3 recovery action Reset" in failure
    assert "GPU 3 (0000:04:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition): the driver asks for recovery " \
           "action" in failure
    assert "sglang_server_gpu_health_check=false skips this check" in failure
    assert server_handlers_ran(run) == [], run.summary
    assert service_state(host) == before
    assert host.file(UNIT).content_string == unit_before
    assert_serving(host)
    for secret in SECRETS:
        assert secret not in run.output

    run = converge()
    assert run.returncode == 0, run.summary
    assert run.said("GPU health gate: healthy: 8 GPUs (NVIDIA RTX PRO 6000 Blackwell Server Edition) fit to serve"), run.summary
    assert service_state(host) == before


def test_tp_that_does_not_divide_into_the_gpus_is_refused(host):
    before = service_state(host)
    run = converge({"sglang_server_extra_args": {"tp-size": 3}})
    assert run.returncode != 0, run.summary
    assert run.said("--tp-size=3 does not divide into the 8 GPUs of this node; use one of: 1, 2, 4, 8"), run.summary
    assert service_state(host) == before


def test_api_key_in_args_is_refused_without_echoing_it(host):
    before = service_state(host)
    run = converge({"sglang_server_extra_args": {"api-key": "leaky-key-in-args-55"}})
    assert run.returncode != 0, run.summary
    assert run.said("sglang_server_api_key"), run.summary
    assert "leaky-key-in-args-55" not in run.output
    assert service_state(host) == before


def test_failed_predownload_leaves_the_running_server_alone(host):
    before = service_state(host)
    unit_before = host.file(UNIT).content_string
    run = converge({
        "sglang_server_predownload": True,
        # Nothing listens there: the Hub's file list cannot be read, as without a route to the Hub.
        "sglang_server_extra_env": dict(SIM_ENV, HF_ENDPOINT="http://127.0.0.1:9"),
        "sglang_server_extra_args": {"max-running-requests": 512},
    })
    assert run.returncode != 0, run.summary
    assert run.said("Cannot read the files of lukealonso/GLM-5-NVFP4 at main from http://127.0.0.1:9"), run.summary
    assert server_handlers_ran(run) == [], run.summary
    assert service_state(host) == before
    assert host.file(UNIT).content_string == unit_before
    assert_serving(host)
    for secret in SECRETS:
        assert secret not in run.output


def test_server_that_never_becomes_healthy_fails_and_shows_the_journal(host):
    run = converge({
        "sglang_server_extra_env": dict(SIM_ENV, INFEROPS_LAB_SIM_NEVER_HEALTHY="1"),
        "sglang_server_health_timeout": 12,
    })
    assert run.returncode != 0, run.summary
    assert run.said("did not become healthy within 12 s"), run.summary
    assert run.said("journal lines"), run.summary
    assert run.said("INFEROPS_LAB_SIM_NEVER_HEALTHY=1: /health will stay 503"), run.summary
    for secret in SECRETS:
        assert secret not in run.output

    run = converge()
    assert run.returncode == 0, run.summary
    assert_serving(host)
