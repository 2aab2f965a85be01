# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After two upgrades, one kept and promoted, one rejected and rolled back by switching venvs."""

import json
import re

import pytest

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY

testinfra_hosts = ["lab-upgrade"]
HISTORY = "/var/lib/sglang/history.jsonl"
VENVS = "/opt/sglang/venvs"


@pytest.fixture(scope="module")
def history(host):
    text = host.file(HISTORY).content_string
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def venvs(host):
    names = host.check_output("ls %s", VENVS).split()
    return dict((re.sub(r"-[0-9a-f]{8}$", "", name), "%s/%s" % (VENVS, name)) for name in names)


def _freeze(host, venv):
    return set(host.check_output("%s/bin/python -m pip list --format=freeze --disable-pip-version-check", venv).split())


def test_every_release_set_tried_has_a_venv_of_its_own(venvs):
    assert sorted(venvs) == ["0.5.23", "0.5.23-lab", "0.5.9"], venvs


def test_the_seed_venv_is_as_pip_installed_it_after_both_upgrades(host, venvs):
    freeze = _freeze(host, venvs["0.5.9"])
    assert {"sglang==0.5.9", "flashinfer-python==0.6.3"} <= freeze, freeze
    assert not any(line.startswith("sglang==0.5.23") for line in freeze)


def test_the_server_runs_the_promoted_release_from_its_venv(host, venvs):
    exec_start = host.check_output("systemctl show -p ExecStart --value sglang.service")
    assert venvs["0.5.23"] + "/bin/python " in exec_start
    assert "--dsa-decode-backend trtllm" in exec_start and "--nsa-decode-backend" not in exec_start
    assert {"sglang==0.5.23", "flashinfer-python==0.7.2"} <= _freeze(host, venvs["0.5.23"])
    assert host.service("sglang").is_running
    assert host.run("curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health").stdout == "200"


def test_the_history_shows_both_upgrades_and_the_rollback_by_switching_back(history):
    outcomes = dict((r["experiment"], r["outcome"]) for r in history if r["event"] == "experiment")
    assert outcomes.get("sglang_upgrade_0_5_23") in ("kept", "inconclusive"), outcomes
    assert outcomes.get("lab_upgrade_wrong_answers") == "rolled_back", outcomes
    sets = [r.get("release_set") for r in history if r["event"] == "deploy"]
    assert sets[0] == "0.5.9" and "0.5.23-lab" in sets and sets[-1] == "0.5.23", sets
    rollback = [r for r in history if r["event"] == "rollback"][-1]
    assert rollback["experiment"] == "lab_upgrade_wrong_answers" and rollback["reason"] == "answers_changed", rollback
    # Back in about a restart: the files of the deploy record put back, no package installed.
    assert rollback["how"].startswith("files put back: "), rollback["how"]
    assert "/etc/systemd/system/sglang.service" in rollback["how"]
    print("\n[upgrade] rejected upgrade back to a healthy baseline in %s s (%s)" % (rollback["recovery_s"], rollback["how"]))


def test_the_promoted_release_starts_as_its_release_set_says(host):
    # 0.5.23's set says `sglang serve`: the unit runs the console script's function with the
    # subcommand (the lab's simulator stands in for the sglang package), and the server does not
    # log the warning 0.5.23's `python -m sglang.launch_server` writes.
    exec_start = host.check_output("systemctl show -p ExecStart --value sglang.service")
    assert "/usr/local/libexec/sglang-launch run inferops_lab_sglang_sim.cli.main:main serve --" in exec_start
    # The lines of this start of the unit only.
    invocation = host.check_output("systemctl show -p InvocationID --value sglang.service")
    journal = host.check_output("journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID=%s", invocation)
    assert "started as `sglang serve` (SGLang 0.5.23)" in journal
    assert "recommended entrypoint" not in journal
    assert LAB_API_KEY not in host.check_output("ps -eo args")
    # The ready path of 0.5.23, which 0.5.9 does not have.
    assert host.run("curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/ready").stdout == "200"
