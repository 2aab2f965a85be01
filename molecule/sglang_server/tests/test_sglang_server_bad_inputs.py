# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad input, one row per input class: the run fails in a validation step, names the variable,
shows no secret, and the serving node is exactly as it was.

It runs on the sglang_server scenario's node after that scenario's own checks (pytest takes this
file after test_sglang_server.py): the rows need a converged server and leave it as they found it,
so one converge serves both.

All role rows run in one ansible-playbook process (one play per row, each catching its own
failure), so the table costs seconds, not a process start per row. Playbook-level rows
(serving_deploy_serial, the node lock) run the real deploy.yml.
"""

import json
import os

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import run_scenario_playbook

SECRET = 'rowsecret-4b1d'
NODE = 'lab-sglang_server'
SIM_ENV = {"PYTHONPATH": "/opt/inferops-lab/sglang_sim", "INFEROPS_LAB_SIM_LOAD_SECONDS": "2"}
# The converge configuration, which every sglang_server row starts from.
SERVER = {
    "sglang_server_package": "inferops_lab_sglang_sim",
    "sglang_server_extra_env": SIM_ENV,
    "sglang_server_read_write_paths": ["-/run/inferops-lab"],
    "sglang_server_predownload": False,
    "sglang_server_api_key": "lab-secret-do-not-log-7f3a9c",
    "sglang_server_hf_token": "hf_labTokenDoNotLog0123456789",
    "sglang_server_start_timeout": 120,
    "sglang_server_health_timeout": 60,
    "sglang_server_health_interval": 2,
    "sglang_server_restart_sec": 2,
}
SECRETS = (SECRET, SERVER["sglang_server_api_key"], SERVER["sglang_server_hf_token"])
VALIDATION_TASKS = (
    "Check the role's inputs before anything changes",
    "Validate the server arguments against the installed SGLang and render the command line",
    "Check that the package index offers every pinned version",
    "Check that every package to install is one of the release set's",
    "Check the release set, and that this node's driver and python3 can run it",
    "Check that the SM120 patch fits the pinned releases",
)

# (row id, role, variables laid over the converge configuration, variable the message must name, words)
ROWS = [
    ("port-above-range", "sglang_server", {"sglang_server_extra_args": {"port": 70000}}, "--port",
     "must be a TCP port from 1 to 65535"),
    ("port-zero", "sglang_server", {"sglang_server_extra_args": {"port": 0}}, "--port", "from 1 to 65535"),
    ("port-not-a-number", "sglang_server", {"sglang_server_extra_args": {"port": "http"}}, "--port",
     "is not a valid int"),
    ("tp-not-a-number", "sglang_server", {"sglang_server_extra_args": {"tp-size": "eight"}}, "--tp-size",
     "is not a valid int"),
    ("tp-over-gpus", "sglang_server", {"sglang_server_extra_args": {"tp-size": 16}}, "--tp-size=16",
     "does not divide into the 8 GPUs"),
    ("tp-over-nodes", "sglang_server", {"sglang_server_extra_args": {"tp-size": 12, "nnodes": 5}}, "--nnodes=5",
     "do not split evenly"),
    ("model-path-empty", "sglang_server", {"sglang_server_extra_args": {"model-path": ""}},
     "sglang_server_extra_args", "must name the model"),
    ("model-path-null", "sglang_server", {"sglang_server_extra_args": {"model-path": None}},
     "sglang_server_extra_args", "must name the model"),
    ("api-key-in-args", "sglang_server", {"sglang_server_extra_args": {"api-key": SECRET}},
     "sglang_server_extra_args", "looks like a secret"),
    ("api-key-abbreviated", "sglang_server", {"sglang_server_extra_args": {"api": SECRET}},
     "sglang_server_extra_args", "looks like a secret"),
    ("admin-key-in-args", "sglang_server", {"sglang_server_extra_args": {"admin-api-key": SECRET}},
     "sglang_server_extra_args", "looks like a secret"),
    ("key-inside-a-value", "sglang_server",
     {"sglang_server_api_key": SECRET, "sglang_server_extra_args": {"served-model-name": "x-" + SECRET}},
     "sglang_server_extra_args", "contains sglang_server_api_key"),
    ("deprecated-flag-with-value", "sglang_server", {"sglang_server_extra_args": {"hybrid-kvcache-ratio": 0.5}},
     "--hybrid-kvcache-ratio", "is a bare flag and takes no value"),
    ("json-option-not-json", "sglang_server",
     {"sglang_server_extra_args": {"preferred-sampling-params": '{"temperature": 0.6'}},
     "--preferred-sampling-params", "is not a valid JSON document"),
    ("flag-typo", "sglang_server", {"sglang_server_extra_args": {"tp-sise": 8}}, "--tp-sise", "did you mean"),
    ("choice-not-allowed", "sglang_server", {"sglang_server_extra_args": {"attention-backend": "nope"}},
     "--attention-backend=nope", "allowed:"),
    ("arg-with-line-break", "sglang_server", {"sglang_server_extra_args": {"served-model-name": "a\nb"}},
     "--served-model-name", "line break"),
    ("api-key-quote", "sglang_server", {"sglang_server_api_key": SECRET + '"'}, "sglang_server_api_key",
     "contains a quote"),
    ("api-key-line-break", "sglang_server", {"sglang_server_api_key": SECRET + "\nX"}, "sglang_server_api_key",
     "contains a line break"),
    ("api-key-space", "sglang_server", {"sglang_server_api_key": SECRET + " x"}, "sglang_server_api_key",
     "white space"),
    ("hf-token-quote", "sglang_server", {"sglang_server_hf_token": "hf_'" + SECRET}, "sglang_server_hf_token",
     "contains a quote"),
    ("secret-in-env", "sglang_server", {"sglang_server_env": {"HF_TOKEN": SECRET}}, "sglang_server_env",
     "is a secret"),
    ("env-bad-name", "sglang_server", {"sglang_server_env": {"1BAD": "x"}}, "sglang_server_env",
     "not a valid environment variable name"),
    ("env-line-break", "sglang_server", {"sglang_server_extra_env": dict(SIM_ENV, NOTE="one\ntwo")},
     "sglang_server_extra_env", "contains a line break"),
    ("env-nested-value", "sglang_server", {"sglang_server_extra_env": dict(SIM_ENV, NOTE={"a": 1})},
     "sglang_server_extra_env", "must be a string or number"),
    # Run as a role, Ansible's own argument check answers first; it names the type it wanted
    # (through deploy.yml the plan's type check does, in its own words: tests/readme).
    ("env-not-a-mapping", "sglang_server", {"sglang_server_extra_env": ["A=1"]}, "sglang_server_extra_env",
     "unable to convert to dict"),
    ("args-not-a-mapping", "sglang_server", {"sglang_server_args": "--tp 8"}, "sglang_server_args",
     "unable to convert to dict"),
    ("server-user-root", "sglang_server", {"sglang_server_service_user": "root"}, "sglang_server_service_user",
     "sglang_server_allow_root: true"),
    ("unit-name-with-suffix", "sglang_server", {"sglang_server_unit_name": "sglang.service"},
     "sglang_server_unit_name", 'without ".service"'),
    ("start-timeout-zero", "sglang_server", {"sglang_server_start_timeout": 0}, "sglang_server_start_timeout",
     "at least 1"),
    ("health-interval-negative", "sglang_server", {"sglang_server_health_interval": -1},
     "sglang_server_health_interval", "at least 1"),
    ("health-timeout-words", "sglang_server", {"sglang_server_health_timeout": "soon"},
     "sglang_server_health_timeout", "unable to convert to int"),
    ("start-limit-zero", "sglang_server", {"sglang_server_start_limit_burst": 0}, "sglang_server_start_limit_burst",
     "at least 1"),
    ("rw-path-relative", "sglang_server", {"sglang_server_read_write_paths": ["run/x"]},
     "sglang_server_read_write_paths", "absolute path"),
    ("config-dir-empty", "sglang_server", {"sglang_server_config_dir": ""}, "sglang_server_config_dir",
     "absolute path"),
    ("vm-cuda-home-relative", "gpu_vm", {"gpu_vm_cuda_home": "usr/local/cuda-12.8"}, "gpu_vm_cuda_home",
     "absolute path"),
    ("sglang-state-dir-relative", "sglang", {"sglang_state_dir": "var/lib/sglang"}, "sglang_state_dir",
     "absolute path"),
    ("vm-repo-url-no-scheme", "gpu_vm", {"gpu_vm_cuda_repo_base_url": "developer.download.nvidia.com"},
     "gpu_vm_cuda_repo_base_url", "http(s)://"),
    ("vm-gpu-count-zero", "gpu_vm", {"gpu_vm_expected_gpu_count": 0}, "gpu_vm_expected_gpu_count",
     "at least 1"),
    ("venv-pip-version-latest", "sglang", {"sglang_venv_pip_version": "latest"}, "sglang_venv_pip_version",
     "exact version"),
    ("sglang-version-not-on-index", "sglang", {"sglang_version": "0.5.99"}, "sglang_version",
     "the package index offers sglang only in"),
    ("sglang-version-range", "sglang", {"sglang_version": ">=0.5"}, "sglang_version", "exact version"),
    ("sglang-user-root", "sglang", {"sglang_service_user": "root"}, "sglang_service_user",
     "sglang_allow_root_service_user"),
    ("sglang-unknown-package", "sglang", {"sglang_packages": ["vllm"]}, "sglang_packages",
     "may only name packages of release set 0.5.9"),
    ("sglang-unknown-release-set", "sglang", {"sglang_release_set": "0.6.0"}, "sglang_release_set",
     "known sets: 0.5.9, 0.5.23"),
    # Today's SGLang with the SM120 patch: refused by name before pip would install 0.5.23.
    ("sm120-patch-on-another-release", "sglang",
     {"sglang_sm120_allreduce_fusion_patch": True, "sglang_version": "0.5.23", "sglang_flashinfer_version": "0.7.2"},
     "sglang_sm120_allreduce_fusion_patch", "fits flashinfer-python 0.6.3 and sglang 0.5.9 only"),
]


SNAPSHOT = (
    "sha256sum /etc/systemd/system/sglang.service /etc/sglang/sglang.env /usr/local/libexec/sglang-launch"
    " /opt/sglang/venv/lib/python3*/site-packages/sglang/srt/server_args.py"
    " /opt/sglang/venv/inferops-constraints.txt 2>&1;"
    " systemctl show sglang.service --property=MainPID,ActiveState,NRestarts;"
    " python3 -c \"import urllib.request as u; print('health', u.urlopen('http://127.0.0.1:8000/health').status)\""
)


def _row_play(row_id, role, variables):
    base = dict(SERVER) if role == "sglang_server" else {"sglang_packages": ["sglang"]} if role == "sglang" else {}
    base.update(variables)
    return {
        "name": "Row %s" % row_id,
        "hosts": NODE,
        "gather_facts": False,
        "become": True,
        "tasks": [
            {"name": "Run the role with the bad input", "block": [
                {"ansible.builtin.include_role": {"name": "inferops.serving.%s" % role}, "vars": base},
                {"ansible.builtin.set_fact": {"__rows": "{{ __rows | default({}) | combine({%r: {'failed': false}}) }}"
                                              % row_id}},
            ], "rescue": [
                {"ansible.builtin.set_fact": {"__rows": (
                    "{{ __rows | default({}) | combine({%r: {'failed': true, 'task': ansible_failed_task.name,"
                    " 'msg': ansible_failed_result.msg | default('') | string}}) }}" % row_id)}},
            ]},
            {"name": "Snapshot the node", "ansible.builtin.shell": SNAPSHOT, "register": "__snapshot",
             "changed_when": False},
            {"ansible.builtin.set_fact": {"__states": "{{ __states | default({}) | combine({%r: __snapshot.stdout})"
                                                      " }}" % row_id}},
        ],
    }


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Run every role row in one ansible-playbook; returns (results, states, before, output)."""
    work = tmp_path_factory.mktemp("rows")
    out = work / "rows.json"
    plays = [{
        "name": "Baseline", "hosts": NODE, "gather_facts": False, "become": True,
        "tasks": [
            {"name": "Read the lab node's GPU topology", "inferops.serving.nccl_topology": {
                "sysfs_root": "/opt/inferops-lab/sys", "tp_size": 8}},
            {"name": "Snapshot the node", "ansible.builtin.shell": SNAPSHOT, "register": "__baseline",
             "changed_when": False},
        ],
    }]
    plays += [_row_play(row_id, role, variables) for row_id, role, variables, _name, _words in ROWS]
    plays.append({
        "name": "Results", "hosts": NODE, "gather_facts": False,
        "tasks": [{"ansible.builtin.copy": {
            "content": "{{ {'rows': __rows, 'states': __states, 'before': __baseline.stdout} | to_json }}",
            "dest": str(out), "mode": "0600"}, "delegate_to": "localhost"}],
    })
    playbook = work / "rows.yml"
    playbook.write_text(json.dumps(plays))
    run = run_scenario_playbook(str(playbook))
    assert run.returncode == 0, run.summary
    data = json.loads(out.read_text())
    return data["rows"], data["states"], data["before"], run.output


@pytest.mark.parametrize("row_id, role, variables, name, words", ROWS, ids=[row[0] for row in ROWS])
def test_bad_input_fails_early_names_the_variable_and_changes_nothing(table, row_id, role, variables, name, words):
    results, states, before, _output = table
    result = results[row_id]
    assert result["failed"], row_id
    assert result["task"] in VALIDATION_TASKS or "argument" in result["msg"], result
    assert name in result["msg"], result["msg"]
    assert words in result["msg"], result["msg"]
    for secret in SECRETS:
        assert secret not in result["msg"]
    assert "health 200" in before and "ActiveState=active" in before, before
    assert states[row_id] == before


def test_no_secret_in_the_output_or_on_the_node_journal(table, host):
    output = table[3]
    journal = host.check_output("journalctl --no-pager -o cat")
    for secret in SECRETS:
        assert secret not in output
        assert secret not in journal


@pytest.mark.parametrize("serial", ["0", "-1", "all", "0%"])
def test_deploy_serial_below_one_is_refused_before_any_task(serial):
    run = run_scenario_playbook(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "deploy.yml"),
                                "-e", "serving_deploy_serial=%s" % serial)
    assert run.returncode != 0, run.summary
    assert run.said("serving_deploy_serial must be a number of nodes of at least 1"), run.summary
    assert run.results == [], run.summary


def test_a_locked_node_refuses_a_second_run_and_says_who_since_when(host):
    record = {"run_id": "ops-9:4242:1", "controller": "ops-9", "user": "alice", "pid": 4242,
              "playbook": "experiment.yml", "purpose": "experiment sm120_allreduce_fusion",
              "since": "2026-02-19T13:53:43Z", "epoch": 1771509223.0,
              "boot_id": host.check_output("cat /proc/sys/kernel/random/boot_id")}
    host.run("install -d /var/lib/inferops-serving && printf '%%s' %s > /var/lib/inferops-serving/node.lock",
             json.dumps(record))
    assert json.loads(host.check_output("cat /var/lib/inferops-serving/node.lock"))["user"] == "alice"
    try:
        # serving_fleet_converge_all: the node takes the deploy path even though nothing would change.
        run = run_scenario_playbook(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "deploy.yml"),
                                    "-e", "serving_fleet_converge_all=true")
        assert run.returncode != 0, run.summary
        assert run.said("locked by another run: alice@ops-9 (pid 4242, experiment.yml, experiment sm120_allreduce_fusion)"
                        " since 2026-02-19T13:53:43Z"), run.summary
        assert not any(name.startswith("inferops.serving.gpu_vm") for _host, name, _result in run.results), run.summary
    finally:
        host.run("rm -f /var/lib/inferops-serving/node.lock")


def test_the_api_key_is_in_no_process_environment_block(host):
    # Every process of the service user: the server and whatever it started.
    procs = host.check_output("pgrep -u sglang || true").split()
    assert host.check_output("systemctl show sglang.service -p MainPID --value") in procs
    for pid in procs:
        environ = host.run("cat /proc/%s/environ" % pid).stdout
        assert SERVER["sglang_server_api_key"] not in environ
    assert SERVER["sglang_server_api_key"] in host.check_output("cat /etc/sglang/sglang.env")


SERVER_UNDER_LOCK = """
- name: A deploy of the server layer under the node lock (what deploy.yml does per node)
  hosts: lab-sglang_server
  gather_facts: false
  become: true
  pre_tasks:
    - name: Lock the node against other runs
      inferops.serving.node_lock:
        purpose: deploy
        wait: 900
        poll: 1
  tasks:
    - name: Deploy under the node lock
      block:
        - name: Read the topology
          inferops.serving.nccl_topology:
            sysfs_root: /opt/inferops-lab/sys
            tp_size: 8
        - name: Server
          ansible.builtin.include_role:
            name: inferops.serving.sglang_server
        - name: Record the deploy
          inferops.serving.history:
            path: /var/lib/sglang/history.jsonl
            event: deploy
            node: "{{ inventory_hostname }}"
            fields:
              args: "{{ sglang_server_deployment.args }}"
      always:
        - name: Release the node lock
          inferops.serving.node_lock:
            state: absent
"""


def test_health_wait_ends_when_systemd_gives_up_and_shows_the_journal(host, tmp_path):
    playbook = tmp_path / "server.yml"
    playbook.write_text(SERVER_UNDER_LOCK)
    broken = dict(SERVER, sglang_server_package="inferops_lab_no_such_package", sglang_server_health_timeout=900,
                  sglang_server_start_limit_burst=2)
    run = run_scenario_playbook(str(playbook), "-e", json.dumps(broken))
    assert run.returncode != 0, run.summary
    assert run.said("sglang.service failed and systemd gave up on it"), run.summary
    assert run.said("No module named 'inferops_lab_no_such_package'"), run.summary
    run = run_scenario_playbook(str(playbook), "-e", json.dumps(SERVER))
    assert run.returncode == 0, run.summary


REFUSED_ON_A_REPLICA = [("experiment.yml", "serving_experiment=sm120_allreduce_fusion"),
                        ("campaign.yml", "serving_campaign=pcie_throughput")]


@pytest.mark.parametrize("playbook, variable", REFUSED_ON_A_REPLICA)
def test_an_experiment_on_one_node_of_a_replica_across_nodes_is_refused_before_anything_changes(
        host, tmp_path, playbook, variable):
    # The second node is never contacted: the refusal comes before any task on a node.
    replica = tmp_path / "replica.yml"
    replica.write_text(json.dumps({"gpu_nodes": {"children": {"replica_a": {
        "hosts": {NODE: {}, NODE + "-rank-1": {"ansible_host": "192.0.2.1"}},
        "vars": {"serving_replica_group": "replica_a"}}}}}))
    before = host.check_output(SNAPSHOT)
    run = run_scenario_playbook("-i", str(replica), os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "playbooks", playbook),
                                "-l", NODE, "-e", variable)
    assert run.returncode != 0, run.summary
    assert run.said("%s is rank 0 of replica replica_a (%s, %s-rank-1), which serves across nodes" % (NODE, NODE, NODE)), run.summary
    assert run.said("roll them out with `ansible-playbook deploy.yml`"), run.summary
    assert not any("Take the node lock" in name for _host, name, _result in run.results), run.summary
    assert not host.file("/var/lib/inferops-serving/node.lock").exists
    assert host.check_output(SNAPSHOT) == before
