# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model weights as a verified artefact, with the real `hf download` against the lab's Hub.

They run after the server role's own tests, on the same node: the first deploys the tiny model with
weights_converge.yml (twice, and in check mode: changed=0), then each case reruns it (some with -e)
and leaves the cache for the next one. The Hub stand-in logs every request in requests.log.
"""

import json
import os

import pytest
from lab_playbooks import changed, run_playbook  # pylint: disable=import-error  # the tests folder, on pytest's path

COMMIT = "bbdfefe5c3852ba589d9a1e216ebdac311b111da"
REPO_DIR = "/var/lib/sglang/huggingface/hub/models--inferops-lab--tiny-model"
SNAPSHOT = REPO_DIR + "/snapshots/" + COMMIT
SHARD_1 = "model-00001-of-00002.safetensors"
SHARD_2 = "model-00002-of-00002.safetensors"
HF_TOKEN = "hf_labWeightsTokenDoNotLog42"
HUB_STATE = "/run/inferops-lab-hub"
SERVER_ARGS = {"model-path": "inferops-lab/tiny-model", "served-model-name": "tiny", "tp-size": 1,
               "host": "127.0.0.1", "port": 8000}


@pytest.fixture(autouse=True)
def journal_on_failure(request, host):
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(host.run("journalctl --no-pager -n 30 -u sglang -u lab-hub").stdout)
        print(host.run("cat /var/lib/sglang/model-download.log").stdout)


def converge(extra_vars=None, playbook="weights_converge.yml", check=False):
    """Run one of the weights cases' playbooks (their converge by default), as a PlaybookRun."""
    return run_playbook(playbook, extra_vars, check=check)


def server_pid(host):
    return host.check_output("systemctl show sglang.service --property=MainPID")


def hub_downloads(host):
    """The file downloads (GET .../resolve/...) the Hub saw since the last call, then forgets them."""
    lines = host.check_output("cat %s/requests.log; : > %s/requests.log" % (HUB_STATE, HUB_STATE)).splitlines()
    return [line for line in lines if line.startswith("GET ") and "/resolve/" in line]


@pytest.fixture(scope="module", autouse=True)
def weights_deployed():
    run = converge()
    assert run.returncode == 0, run.summary
    for check in (False, True):
        run = converge(check=check)
        assert run.returncode == 0 and changed(run) == 0, run.summary


def test_the_server_serves_the_pinned_commit_it_verified(host):
    exec_start = [line for line in host.file("/etc/systemd/system/sglang.service").content_string.splitlines()
                  if line.startswith("ExecStart=")][0]
    assert "--revision %s" % COMMIT in exec_start
    for name in ("config.json", "model.safetensors.index.json", SHARD_1, SHARD_2):
        assert host.file("%s/%s" % (SNAPSHOT, name)).exists, name
    record = json.loads(host.file("/var/lib/sglang/model-weights.json").content_string)
    assert sorted(entry["sha256"] for entry in record.values()) == sorted(
        os.path.basename(host.check_output("readlink -f %s/%s" % (SNAPSHOT, shard))) for shard in (SHARD_1, SHARD_2))
    assert host.file("/var/lib/sglang/model-download.progress").content_string.endswith("(100%)\n")
    # The token reached the download as a scratch file, removed again, and nothing kept it.
    assert not host.file("/var/lib/sglang/.hf-token-for-download").exists
    assert HF_TOKEN not in host.check_output("cat /var/lib/sglang/model-download.log /var/lib/sglang/model-weights.json")
    assert host.service("sglang").is_running
    hub_downloads(host)


def test_weights_staged_ahead_are_downloaded_beside_the_running_server_and_the_deploy_finds_them(host):
    # What deploy.yml does on every node that changes before its rollout drains the first one.
    pid = server_pid(host)
    unit = host.file("/etc/systemd/system/sglang.service").content_string
    host.check_output("rm -rf %s /var/lib/sglang/model-weights.json" % REPO_DIR)
    hub_downloads(host)
    run = converge(playbook="weights_stage.yml")
    assert run.returncode == 0, run.summary
    fetched = sorted(line.split()[1].rsplit("/", 1)[-1] for line in hub_downloads(host))
    assert SHARD_1 in fetched and SHARD_2 in fetched, fetched
    assert host.file("%s/%s" % (SNAPSHOT, SHARD_2)).exists
    # The server went on serving: not restarted, not reconfigured.
    assert server_pid(host) == pid
    assert host.file("/etc/systemd/system/sglang.service").content_string == unit
    # The deploy then finds the weights verified: nothing downloaded, nothing changed.
    run = converge()
    assert run.returncode == 0, run.summary
    assert hub_downloads(host) == [] and changed(run) == 0, run.summary


def test_too_little_disk_is_refused_naming_both_figures(host):
    host.check_output("rm -rf %s" % REPO_DIR)
    before = server_pid(host)
    run = converge({"sglang_server_weights_disk_margin": "1000TB"})
    assert run.returncode != 0, run.summary
    assert run.said("Not enough free space for the model weights") and run.said("sglang_server_weights_disk_margin"), run.summary
    assert run.said("bytes) is free") and run.said("Nothing was downloaded"), run.summary
    assert hub_downloads(host) == [] and server_pid(host) == before
    assert HF_TOKEN not in run.output


def test_an_interrupted_download_fails_and_the_next_run_resumes_it_and_repairs_the_cache(host):
    host.check_output("echo %s > %s/interrupt-once" % (SHARD_2, HUB_STATE))
    before = server_pid(host)
    run = converge()
    assert run.returncode != 0 and run.said("the next run resumes it"), run.summary
    assert server_pid(host) == before
    partial = host.check_output("find %s/blobs -name '*.incomplete' -size +0" % REPO_DIR)
    assert partial, "the interrupted download left no partial file"
    hub_downloads(host)
    # Meanwhile a shard was cut short on disk, and a download of another revision never finished.
    host.check_output("truncate -s 1000 $(readlink -f %s/%s)" % (SNAPSHOT, SHARD_1))
    host.check_output("touch %s/blobs/%s.incomplete" % (REPO_DIR, "0" * 64))
    run = converge()
    assert run.returncode == 0 and changed(run) > 0, run.summary
    downloads = hub_downloads(host)
    assert sorted(line.split()[1].rsplit("/", 1)[-1] for line in downloads) == [SHARD_1, SHARD_2]
    resumed = [line for line in downloads if SHARD_2 in line][0]
    assert resumed.split()[-1].startswith("bytes="), resumed
    assert not host.check_output("find %s/blobs -name '*.incomplete'" % REPO_DIR)


@pytest.mark.parametrize("repo, says", [
    ("inferops-lab/tiny-model-bad-hash", "%s has sha256 " % SHARD_2),
    ("inferops-lab/tiny-model-missing-shard",
     "model-00003-of-00003.safetensors is listed in model.safetensors.index.json but not in the repository"),
])
def test_a_model_that_does_not_verify_never_reaches_the_server(host, repo, says):
    before = server_pid(host), host.file("/etc/systemd/system/sglang.service").sha256sum
    run = converge({"sglang_server_args": dict(SERVER_ARGS, **{"model-path": repo}),
                    "sglang_server_model_revision": ""})
    assert run.returncode != 0 and run.said(says) and run.said("did not verify"), run.summary
    assert run.said("sglang_server_model_revision is empty"), run.summary
    assert (server_pid(host), host.file("/etc/systemd/system/sglang.service").sha256sum) == before
    hub_downloads(host)


def test_a_shared_pre_populated_cache_needs_no_download(host):
    host.check_output("mkdir -p /srv/shared-hf && cp -a /var/lib/sglang/huggingface/hub /srv/shared-hf/ "
                      "&& chown -R root:root /srv/shared-hf && chmod -R go+rX /srv/shared-hf")
    run = converge({"sglang_server_hf_home": "/srv/shared-hf"})
    assert run.returncode == 0, run.summary
    assert hub_downloads(host) == []
    assert 'HF_HOME="/srv/shared-hf"' in host.file("/etc/sglang/sglang.env").content_string
    assert host.service("sglang").is_running
