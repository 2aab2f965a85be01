# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang upgrades as an operator runs them, each run read as data (the JSON callback), not as
printed lines; then today's server behind smg restarted under long streams, and monitoring.

Each test is the command the operator types against the scenario's node and inventory, in file
order: a deploy of release set 0.5.23 refused before the switch; the upgrade as an experiment,
kept; its promotion in the inventory, which the node already runs; a second upgrade whose answers
differ, rolled back by switching venvs back; the report; a last deploy that changes nothing, and a
request through the router. Then a restart that lets two long streams finish, one that stops at
the bound when a stream outlives it, the deploy that brings the node back into the router, and
playbooks/monitoring.yml. The file runs first among the scenario's tests (pytest takes the files
by name): test_monitoring.py and test_upgrade.py read what it leaves. Every test takes testinfra's
`host` (the node): pytest keeps tests that share it in file order.
"""
import json
import os
import re
import shlex
import threading

import pytest
import yaml

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY, REPO_ROOT, container_address, inventory_vars
from ansible_collections.inferops.serving.tests.utils.router import router_api, router_workers
from ansible_collections.inferops.serving.tests.utils.playbook import run_scenario_playbook
from ansible_collections.inferops.serving.tests.utils.wait import until

NODE = "lab-upgrade"
testinfra_hosts = [NODE]
ROUTER = "lab-upgrade-router"
ROUTER_VARS = inventory_vars("molecule/upgrade/inventory/group_vars/sglang_routers/upgrade.yml")
NODE_LOCK = "/var/lib/inferops-serving/node.lock"
SEED_VENV = re.compile(r"/opt/sglang/venvs/0\.5\.9-[0-9a-f]{8}/bin/python")
UPGRADE_VENV = re.compile(r"/opt/sglang/venvs/0\.5\.23-[0-9a-f]{8}/bin/python")
# What the operator writes into the inventory to make the kept upgrade the baseline: the
# experiment's variables, as playbooks/campaign.yml would print them.
PROMOTION = """# host_vars/%s.yml - the upgrade sglang_upgrade_0_5_23 was kept.
sglang_release_set: "0.5.23"
sglang_server_extra_args:
  nsa-decode-backend: false
  nsa-prefill-backend: false
  dsa-decode-backend: trtllm
  dsa-prefill-backend: trtllm
""" % NODE
with open(os.path.join(REPO_ROOT, "roles", "sglang_server", "defaults", "main.yml"), encoding="utf-8") as _handle:
    # One argument changed, laid over the role's documented server arguments: a restart.
    CHANGED_ARGS = json.dumps({"sglang_server_args": dict(yaml.safe_load(_handle)["sglang_server_args"],
                                                          **{"max-running-requests": 640})})
# The unit's state a restart changes: its process and its command line.
UNIT_STATE = "systemctl show sglang.service --property=MainPID --property=ExecStart"
# A streaming chat request sent straight to the node, writing its events to /root/NAME.out; curl is
# the process itself (exec), so that it can be stopped by that name.
STREAM = ("rm -f /root/%(name)s.out && setsid -f sh -c 'exec curl -sN -o /root/%(name)s.out"
          " -H \"Authorization: Bearer $0\" -H \"Content-Type: application/json\""
          " -d \"{\\\"model\\\": \\\"glm-5\\\", \\\"stream\\\": true, \\\"max_tokens\\\": %(tokens)d,"
          " \\\"messages\\\": [{\\\"role\\\": \\\"user\\\", \\\"content\\\": \\\"Write a long story.\\\"}]}\""
          " http://127.0.0.1:8000/v1/chat/completions' %(key)s </dev/null >/dev/null 2>&1")


def operator(*arguments):
    """ansible-playbook as the operator types it in the checkout, limited to the node."""
    return run_scenario_playbook("-l", NODE, *arguments)


def restarting_operator(*arguments):
    """The same, keeping every release set's venv for verify (the default sglang_venvs_keep=2 would
    prune the seed's)."""
    return operator("-e", "sglang_venvs_keep=3", *arguments)


@pytest.fixture(scope="module")
def story():
    """What one step of the story notes for a later one."""
    return {}


@pytest.fixture(scope="module")
def router_url():
    return "http://%s:30000" % container_address(ROUTER)


def command_line(host):
    """The server's command line as systemd runs it (its ExecStart also says when it last ran)."""
    exec_start = host.check_output("systemctl show -p ExecStart --value sglang.service")
    return re.search(r"argv\[\]=[^;]*", exec_start).group(0)


def says_last(run, *patterns):
    """RUN's last words, after the lock's release, are the closing message and match every one of
    the regular expressions PATTERNS."""
    last = run.closing_message()
    assert "Release the node lock" in run.task_names()[:-1], run.task_names()[-5:]
    for pattern in patterns:
        assert re.search(pattern, last), (pattern, last)


def healthy_workers(router_url):
    return [worker for worker in router_workers(router_url, ROUTER_VARS["sglang_router_admin_api_key"]) or [] if worker["is_healthy"]]


# The operator's first try: release set 0.5.23 from the command line, with its new flags and one
# value it does not know. The SGLang 0.5.9 installed now refuses the new flags, as expected: a note;
# the 0.5.23 installed beside it refuses the value: the deploy stops before the switch.
def test_a_deploy_of_0_5_23_with_a_value_it_does_not_know_is_refused_and_the_node_serves_as_before(host, story):
    story["seed"] = command_line(host)
    refused_args = {"sglang_server_extra_args": {"nsa-decode-backend": False, "nsa-prefill-backend": False,
                                                 "dsa-prefill-backend": "trtllm", "dsa-decode-backend": "no-such-backend"}}
    run = operator("deploy.yml", "-e", "sglang_release_set=0.5.23", "-e", json.dumps(refused_args))
    assert run.returncode != 0, run.summary
    # The last words: what was refused, on which node, what to change, and that the node serves as
    # before; after the lock's release.
    says_last(run, "Deploy refused \\(release set 0\\.5\\.23\\) on %s: The SGLang 0\\.5\\.23 installed here does not accept" % NODE,
              "dsa-decode-backend",
              "What to change: change or remove these server arguments in sglang_server_args or sglang_server_extra_args",
              r"The node serves as before: sglang\.service still runs the same process \(PID [0-9]+\)")
    # The check of the SGLang installed now was a note, never an error: no failed task says it.
    assert run.said("Note: the SGLang 0.5.9 installed now does not accept the server arguments"), run.summary
    assert not [message for message in run.failures() if "0.5.9" in message], run.summary
    assert not re.search(r"\[ERROR\][^\n]*0\.5\.9", run.text), run.summary
    assert command_line(host) == story["seed"]


# The lab's simulated server is as fast on either release: the gate finds no difference beyond the
# noise, the answers are the same, and the experiment says an upgrade like that stays.
def test_the_upgrade_as_an_experiment_is_installed_beside_the_seeds_venv_checked_and_kept(host, story):
    run = operator("playbooks/experiment.yml", "-e", "serving_experiment=sglang_upgrade_0_5_23")
    assert run.returncode == 0, run.summary
    assert any(re.search(r"Experiment sglang_upgrade_0_5_23 (kept|inconclusive) on " + NODE, message)
               for message in run.messages()), run.summary
    assert run.said("It stays until the next deploy.yml"), run.summary
    # Behind smg, the node left the router before anything changed, and came back healthy.
    left = run.results_named("Take the node out of the router on " + ROUTER)
    back = run.results_named("Put the node back into the router")
    assert left and not left[0].get("skipped") and back and not back[0].get("skipped"), run.task_names()
    story["upgraded"] = command_line(host)
    assert SEED_VENV.search(story["seed"]) and UPGRADE_VENV.search(story["upgraded"]), story


def test_the_promoted_inventory_is_what_the_node_already_runs(host):
    host_vars = os.path.join(os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), "host_vars")
    os.makedirs(host_vars, exist_ok=True)
    with open(os.path.join(host_vars, NODE + ".yml"), "w") as handle:
        handle.write(PROMOTION)
    run = operator("deploy.yml")
    assert run.returncode == 0, run.summary
    assert run.said("current: " + NODE), run.summary
    assert run.recap[NODE].changed == 0, run.summary


# The promoted 0.5.23 is the baseline; the second upgrade is refused by its answers whatever its
# speed, and the rollback puts back the unit of the venv that served before, in about a restart.
def test_a_second_upgrade_whose_answers_differ_is_rolled_back_to_the_venv_it_ran_from(host, story):
    run = operator("playbooks/experiment.yml", "-e", "serving_experiment=lab_upgrade_wrong_answers")
    assert run.returncode != 0, run.summary
    assert run.said("Experiment lab_upgrade_wrong_answers rolled back on %s: answers changed: token agreement" % NODE), run.summary
    assert run.said("The baseline is running and healthy again"), run.summary
    says_last(run, "Experiment lab_upgrade_wrong_answers rolled back on %s: answers changed" % NODE,
              "What to change: nothing on the node",
              "The baseline is running and healthy again: the node serves as before",
              r"change the experiment.s variables \(sglang_release_set")
    assert command_line(host) == story["upgraded"]


def test_the_report_shows_the_release_sets_the_node_ran(host, tmp_path):
    run = operator("playbooks/report.yml", "-e", "serving_reports_dir=%s" % tmp_path)
    assert run.returncode == 0, run.summary
    report = (tmp_path / NODE / "report.html").read_text()
    for pattern in (r"release set <b>0\.5\.23</b>", r"release set 0\.5\.9 \(sglang 0\.5\.9\)",
                    r"release set 0\.5\.23-lab \(sglang 0\.5\.23\)"):
        assert re.search(pattern, report), (pattern, re.findall(r"release set[^<]*", report))


# smg passes the client's key on to the server: the one key the lab's clients and servers share.
def test_a_last_deploy_changes_nothing_and_the_node_answers_through_the_router(host, router_url):
    run = operator("deploy.yml")
    assert run.returncode == 0 and run.said("current: " + NODE), run.summary
    assert (run.recap[NODE].changed, run.recap[NODE].unreachable, run.recap[NODE].failed) == (0, 0, 0), run.summary
    assert len(healthy_workers(router_url)) == 1
    answer = router_api(router_url, "/v1/chat/completions", ROUTER_VARS["sglang_router_api_key"],
                        {"model": "glm-5", "max_tokens": 4, "messages": [{"role": "user", "content": "Say hi."}]})
    assert len(answer["choices"]) == 1, answer


# Today's server behind smg, restarted under long streams. A restart drains the node: out of the
# router, then its requests finish within sglang_server_stop_timeout (the bound its unit's stop
# gives them too), and none is cut short.
def test_a_routed_restart_lets_two_long_streams_finish_before_the_server_restarts(host):
    rate = json.loads(host.check_output("curl -sf -H 'Authorization: Bearer %s' http://127.0.0.1:8000/server_info",
                                        LAB_API_KEY))["rate_tok_s"]
    before = host.check_output(UNIT_STATE)
    deploys = []
    deploy = threading.Thread(target=lambda: deploys.append(restarting_operator("deploy.yml", "-e", CHANGED_ARGS)))
    deploy.start()
    try:
        # The streams start once the deploy holds the node lock (its plan takes it first), some 10
        # to 20 s before its drain, so that they are running when the drain begins.
        until("the deploy holding the node lock", lambda: host.run("grep -q '\"purpose\": \"deploy\"' %s", NODE_LOCK).rc == 0,
              wait_s=600, interval=1)
        # The two share the node's token rate: together about 40 s, far within the node's bound (120 s).
        for name in ("within-1", "within-2"):
            host.check_output(STREAM % {"name": name, "tokens": int(rate * 20), "key": shlex.quote(LAB_API_KEY)})
    finally:
        deploy.join(timeout=900)
    run = deploys[0]
    assert run.returncode == 0, run.summary
    # The drain found them running and waited for them.
    drain = run.results_named("Wait until the requests the node holds have finished")
    assert drain and drain[0]["reads"] > 1 and drain[0]["drained"], run.summary
    for name in ("within-1", "within-2"):
        events = host.file("/root/%s.out" % name).content_string
        assert re.search(r'"finish_reason": "length"[^\n]*\n+data: \[DONE\]\s*$', events), events[-600:]
    after = host.check_output(UNIT_STATE)
    assert "--max-running-requests 640" in after
    assert re.search(r"MainPID=[0-9]+", after).group(0) != re.search(r"MainPID=[0-9]+", before).group(0)
    # When the last stream event was written, and when the new server process started (seconds).
    last_event, started = (int(value) for value in host.check_output(
        'echo $(stat -c %Y /root/within-1.out /root/within-2.out | sort -n | tail -n 1)'
        ' $(date +%s -d "$(systemctl show -p ExecMainStartTimestamp --value sglang.service)")').split())
    assert last_event <= started, (last_event, started)


# A stream that outlives the bound stops the run at the bound, uncut, the server untouched.
def test_a_stream_that_outlives_the_stop_bound_stops_the_run_there_with_the_server_untouched(host):
    rate = json.loads(host.check_output("curl -sf -H 'Authorization: Bearer %s' http://127.0.0.1:8000/server_info",
                                        LAB_API_KEY))["rate_tok_s"]
    host.check_output(STREAM % {"name": "outlives", "tokens": int(rate * 300), "key": shlex.quote(LAB_API_KEY)})
    try:
        until("the stream streaming", lambda: host.run("grep -c 'data: ' /root/outlives.out").rc == 0, wait_s=15, interval=1)
        before = host.check_output(UNIT_STATE)
        # The operator gives its requests 15 s: the unit changes (TimeoutStopSec), so the node drains.
        run = restarting_operator("deploy.yml", "-e", CHANGED_ARGS, "-e", "sglang_server_stop_timeout=15")
        events = host.file("/root/outlives.out").content_string
        assert run.returncode != 0, run.summary
        assert run.said("%s did not drain: it is out of the router, but 1 requests are still running and 0 queued after 15 s"
                        % NODE), run.summary
        assert "data: " in events and "[DONE]" not in events, events[-600:]
        assert host.check_output(UNIT_STATE) == before
    finally:
        host.run("pkill -f /root/outlives.out")  # the client gives up its stream


def test_the_next_deploy_brings_the_node_back_into_the_router(host, router_url):
    run = restarting_operator("deploy.yml")
    assert run.returncode == 0 and run.recap[NODE].changed > 0, run.summary
    until("the node healthy in the router", lambda: len(healthy_workers(router_url)) == 1, wait_s=30)


# Monitoring against today's stack: the operator's playbooks/monitoring.yml puts Prometheus on the
# router's host, scraping the 0.5.23 server, smg and both node exporters; test_monitoring.py asks it
# what the shipped dashboard and alerts read.
def test_monitoring_deploys_on_the_routers_host(host):  # pylint: disable=unused-argument
    run = run_scenario_playbook("playbooks/monitoring.yml")
    assert run.returncode == 0, run.summary
