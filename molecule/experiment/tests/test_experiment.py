# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After the forced experiment and its automatic rollback the node is the baseline again."""

import json
import shlex

import pytest

HISTORY = "/var/lib/sglang/history.jsonl"
UNIT = "/etc/systemd/system/sglang.service"
JIT_MODULE = "/var/lib/sglang/.cache/flashinfer/0.6.3/120a/cached_ops/trtllm_comm"
PATCHED_FILES = {
    "flashinfer_python": ["flashinfer/jit/comm.py",
                          "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"],
    "sglang": ["sglang/srt/layers/communicator.py", "sglang/srt/server_args.py"],
}

# Compares each file with the sha256 pip recorded for it in its distribution's RECORD.
RECORD_CHECK = r"""
import base64, glob, hashlib, json, sys
site = glob.glob('/opt/sglang/venvs/0.5.9-*/lib/python3*/site-packages')[0]
wanted = json.loads(sys.argv[1])
result = {}
for dist, paths in wanted.items():
    record = glob.glob('%s/%s-*.dist-info/RECORD' % (site, dist))[0]
    hashes = dict(line.split(',')[:2] for line in open(record) if line.count(',') >= 2)
    for path in paths:
        digest = base64.urlsafe_b64encode(hashlib.sha256(open('%s/%s' % (site, path), 'rb').read()).digest())
        result[path] = hashes[path] == 'sha256=' + digest.rstrip(b'=').decode()
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def history(host):
    text = host.file(HISTORY).content_string
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def journal(host):
    return host.run("journalctl -u sglang.service --no-pager -n 40").stdout


def test_patched_files_are_pristine_per_record(host):
    result = host.run("/usr/bin/python3 - %s <<'EOF'\n%s\nEOF" % (shlex.quote(json.dumps(PATCHED_FILES)), RECORD_CHECK))
    assert result.rc == 0, result.stderr
    assert json.loads(result.stdout) == {path: True for paths in PATCHED_FILES.values() for path in paths}


def test_stale_sm120_jit_build_is_gone(host):
    assert not host.file(JIT_MODULE).exists


def test_unit_runs_the_baseline_arguments(host):
    unit = host.file(UNIT).content_string
    exec_start = [line for line in unit.splitlines() if line.startswith("ExecStart=")][0]
    assert "--enable-flashinfer-allreduce-fusion" not in exec_start
    assert "--max-running-requests 1024" in exec_start


def test_server_is_healthy(host, journal):
    assert host.service("sglang").is_running, journal
    assert host.run("curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health").stdout == "200", journal


def test_history_tells_the_story(history):
    events = [(r["event"], r.get("experiment"), r.get("outcome")) for r in history]
    seed = [r for r in history if r.get("experiment") == "sm120_allreduce_fusion"]
    refused = [r for r in seed if r["event"] == "experiment" and r["outcome"] == "refused"]
    fused_benchmarks = [r for r in seed if r["event"] == "benchmark"]
    rollbacks = [r for r in seed if r["event"] == "rollback"]
    outcome = [r for r in seed if r["event"] == "experiment" and r["outcome"] == "rolled_back"]
    assert refused and "allreduce_fusion_advised is false" in refused[0]["blocked_by"], events
    assert len(fused_benchmarks) == 1 and len(rollbacks) == 1 and len(outcome) == 1, events
    before = [r for r in history[:history.index(fused_benchmarks[0])]
              if r["event"] == "benchmark" and r.get("experiment") is None]
    baseline = before[-1]["metrics"]
    fused = fused_benchmarks[0]["metrics"]
    # The seed: about 1,867 -> 236 tok/s and 250 W -> 125 W of 600 W.
    assert fused["output_throughput"] < 0.5 * baseline["output_throughput"]
    assert fused["gpu"]["mean_power_w"] < baseline["gpu"]["mean_power_w"]
    assert baseline["gpu"]["power_limit_w"] == 600.0
    assert outcome[0]["baseline_throughput"] == baseline["output_throughput"]
    assert outcome[0]["experiment_throughput"] == fused["output_throughput"]
    assert rollbacks[0]["reason"] == "regression" and rollbacks[0]["recovery_s"] > 0
    # The rollback is a deploy of the very configuration benchmarked before the experiment.
    deploys = [r for r in history if r["event"] == "deploy"]
    assert deploys[-1]["experiment"] is None
    assert deploys[-1]["fingerprint"] == before[-1]["fingerprint"]
    assert any(r["event"] == "experiment" and r["outcome"] == "kept" for r in history), events


def test_history_belongs_to_the_service_user(host):
    history = host.file(HISTORY)
    assert history.user == "sglang" and history.mode == 0o640


def test_history_shows_the_spread_and_energy(history):
    benchmarks = [r for r in history if r["event"] == "benchmark"]
    repeated = [r["metrics"] for r in benchmarks if r["metrics"].get("repeats") == 3]
    assert repeated, [r["metrics"].get("repeats") for r in benchmarks]
    spread = repeated[0]["spread"]["output_throughput"]
    assert spread["n"] == 3 and spread["stdev"] is not None and spread["min"] <= spread["mean"] <= spread["max"]
    # The first is the campaign's baseline: 8 simulated GPUs at about 250 W, roughly 1,867 / 2,000
    # tokens per joule. The last is the forced fusion: 236 tok/s at 8 x 125 W, about 0.24.
    assert 0.5 < repeated[0]["tokens_per_joule"] < 1.5
    assert 0.1 < repeated[-1]["tokens_per_joule"] < 0.5
    assert len(repeated[-1]["runs"]) == 3


def test_history_keeps_the_verdicts_and_where_answers_parted(history):
    experiments = {r["experiment"]: r for r in history if r["event"] == "experiment" and r.get("campaign") is None}
    assert experiments["lab_within_noise"]["outcome"] == "inconclusive"
    assert experiments["lab_within_noise"]["noise_pct"] is not None
    wrong = experiments["lab_fast_but_wrong"]
    assert wrong["outcome"] == "rolled_back" and wrong["reason"] == "answers_changed"
    assert wrong["answers"]["agreement"] < 0.9 and wrong["answers"]["first_difference"]["position"] == 6
    assert wrong["experiment_throughput"] > wrong["baseline_throughput"]


def test_campaign_is_recorded_with_its_promotion(history):
    campaigns = [r for r in history if r["event"] == "campaign"]
    assert len(campaigns) == 1
    campaign = campaigns[0]
    assert campaign["campaign"] == "pcie_throughput"
    verdicts = [row["verdict"] for row in campaign["rows"]]
    # The middle step (+15% in the lab) may be inconclusive on a host busy with other scenarios.
    assert verdicts[0] == "kept" and verdicts[1] in ("kept", "inconclusive") and verdicts[2] == "rolled_back"
    assert campaign["kept"] == [row["experiment"] for row in campaign["rows"] if row["verdict"] == "kept"]
    assert campaign["promotion"]["sglang_server_extra_args"]["max-running-requests"] == 2048
    if verdicts[1] == "kept":
        assert campaign["promotion"]["sglang_server_extra_env"]["NCCL_MIN_NCHANNELS"] == "16"
