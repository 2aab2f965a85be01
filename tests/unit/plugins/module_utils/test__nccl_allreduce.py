# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The all-reduce check's output read back: real runs on one and two H200s, and failures."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._nccl_allreduce import (
    AllreduceCheckError,
    MARKER,
    bandwidth,
    evidence,
    parse_events,
    parse_nccl_log,
    summarize,
)
from ansible_collections.inferops.serving.plugins.module_utils import _nccl_allreduce_worker

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "nccl_allreduce", "h200x2-2026-11-30")
ONE_GPU = os.path.join(os.path.dirname(__file__), "fixtures", "nccl_allreduce", "h200x1-2026-12-01")


def read(name, folder=FIXTURES):
    with open(os.path.join(folder, name)) as handle:
        return handle.read()


def facts_of(log_name, rc=0, timed_out=False, folder=FIXTURES):
    text = read(log_name, folder)
    return summarize(parse_events(text), parse_nccl_log(text), rc, timed_out, 180)


def module_facts(name, folder=FIXTURES):
    facts = json.loads(read(name + ".json", folder))["ansible_facts"]["nccl_allreduce_check"]
    # The 2026-11-30 captures predate inject_wrong; they ran without it.
    facts.setdefault("inject_wrong", None)
    return facts


@pytest.mark.parametrize("run", ["gpu2_run1", "gpu2_run2"])
def test_two_h200_over_nvlink_are_correct_with_p2p_on_every_pair(run):
    facts = facts_of(run + ".log")
    assert facts["ok"] and facts["failure"] is None
    assert facts["world_size"] == 2 and facts["p2p_access"] == [[True, True], [True, True]]
    assert facts["p2p_all_pairs"] is True
    assert facts["transports"] == ["P2P"]
    assert {(c["from"], c["to"]) for c in facts["connections"]} == {(0, 1), (1, 0)}
    assert facts["nccl_version"] == "2.28.9" and facts["torch_version"] == "2.11.0+cu130"
    assert [r["bytes"] for r in facts["results"]] == [4096, 65536, 1048576, 16777216, 268435456]
    assert all(r["correct"] and r["mismatches"] == 0 for r in facts["results"])
    largest = facts["results"][-1]
    # NVLink NV18 between the two H200s: far beyond any PCIe path at 256 MiB.
    assert largest["busbw_gbps"] > 100
    # Two ranks: NCCL's bus bandwidth factor 2(n-1)/n is 1.
    assert largest["busbw_gbps"] == largest["algbw_gbps"]
    # What the module returned on the machine is what the parser computes from its log.
    assert facts == module_facts(run)


@pytest.mark.parametrize("run", ["gpu1_run1", "gpu1_run2"])
def test_one_gpu_has_no_bus_traffic(run):
    facts = facts_of(run + ".log")
    assert facts["ok"] and facts["world_size"] == 1 and facts["visible_gpus"] == 1
    assert facts["gpus"] == [{"index": 0, "name": "NVIDIA H200", "bus_id": "00000000:00:06.0"}]
    assert facts["transports"] == [] and facts["p2p_access"] == [[True]]
    assert all(r["busbw_gbps"] == 0 for r in facts["results"])
    assert facts == module_facts(run)


def test_gpu_not_visible_names_the_counts():
    result = json.loads(read("not_visible.json"))
    facts = module_facts("not_visible")
    assert result["failed"] and facts["failure"]["kind"] == "gpu_not_visible"
    assert "3 GPUs asked for, torch sees 2" in result["msg"]
    assert facts == facts_of("not_visible.log", rc=4)


def test_torch_missing_names_the_interpreter():
    result = json.loads(read("torch_missing.json"))
    assert result["failed"] and result["ansible_facts"]["nccl_allreduce_check"]["failure"]["kind"] == "torch_missing"
    assert "/tmp/notorch/bin/python3 cannot import torch" in result["msg"]


def test_timeout_killed_the_job_and_left_no_rank_behind():
    result = json.loads(read("timeout.json"))
    facts = result["ansible_facts"]["nccl_allreduce_check"]
    assert result["failed"] and facts["timed_out"] and facts["failure"]["kind"] == "timeout"
    assert "killed after 25 s" in result["msg"]
    assert facts["results"][0]["correct"] is False and facts["results"][0]["time_us"] is None
    assert "none" in read("after_timeout.txt").splitlines()[1]


def test_a_clean_run_on_one_h200_still_passes():
    facts = facts_of("gpu1_clean.log", folder=ONE_GPU)
    assert facts["ok"] and facts["inject_wrong"] is None
    assert [r["bytes"] for r in facts["results"]] == [4096, 1048576, 67108864]
    assert facts == module_facts("gpu1_clean", ONE_GPU)


def test_an_element_injected_on_an_h200_is_the_one_reported():
    result = json.loads(read("gpu1_inject_r0_i777.json", ONE_GPU))
    facts = facts_of("gpu1_inject_r0_i777.log", rc=0, folder=ONE_GPU)
    assert facts == module_facts("gpu1_inject_r0_i777", ONE_GPU)
    assert result["failed"] and facts["failure"]["kind"] == "wrong_result"
    assert facts["inject_wrong"] == {"rank": 0, "index": 777}
    assert result["msg"] == (
        "All-reduce check across 1 GPUs failed: the all-reduce returned wrong sums: 1 wrong element at 4096 bytes "
        "(first: element 777 on rank 0, got 26.0, expected 25.0); inject_wrong was set: element 777 of rank 0 "
        "was made wrong on purpose")
    # Every size holds element 777: one wrong element each, in the first all-reduce only.
    for row in facts["results"]:
        assert row["mismatches"] == 1 and row["complete"] and not row["correct"]
        assert row["first_mismatch"] == {"index": 777, "got": 26.0, "expected": 25.0, "rank": 0, "phase": "first"}
    after = [e for e in parse_events(read("gpu1_inject_r0_i777.log", ONE_GPU)) if e.get("phase") == "after"]
    assert len(after) == 3 and all(e["mismatches"] == 0 for e in after)


def test_an_element_beyond_the_smaller_sizes_leaves_them_correct():
    result = json.loads(read("gpu1_inject_r0_i300000.json", ONE_GPU))
    facts = result["ansible_facts"]["nccl_allreduce_check"]
    assert not result.get("failed") and result["job_rc"] == 0 and not facts["ok"]
    assert facts == facts_of("gpu1_inject_r0_i300000.log", folder=ONE_GPU)
    assert [(r["bytes"], r["mismatches"]) for r in facts["results"]] == [(4096, 0), (1048576, 0), (67108864, 1)]
    assert facts["results"][2]["first_mismatch"]["index"] == 300000
    assert "1 wrong element at 67108864 bytes (first: element 300000 on rank 0, got 57.0, expected 56.0)" in (
        facts["failure"]["msg"])


def test_an_injection_on_a_rank_the_job_lacks_is_refused():
    result = json.loads(read("gpu1_inject_rank1.json", ONE_GPU))
    facts = result["ansible_facts"]["nccl_allreduce_check"]
    assert result["failed"] and result["job_rc"] == 2 and facts["failure"]["kind"] == "bad_argument"
    assert "--inject-wrong names rank 1; the job has ranks 0 to 0" in result["msg"]
    assert facts == facts_of("gpu1_inject_rank1.log", rc=2, folder=ONE_GPU)


def test_network_transport_lines_name_their_side():
    # NCCL's format for its network transport (src/transport/net.cc): "[send]" or "[receive]" before "via".
    text = "\n".join([
        "vm:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
        "vm:2:2 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/Socket/0",
        "vm:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/Socket/0",
    ])
    nccl = parse_nccl_log(text)
    assert nccl["transports"] == ["NET"]
    assert nccl["connections"] == [{"from": 0, "to": 1, "transport": "NET"}, {"from": 1, "to": 0, "transport": "NET"}]


def test_wrong_sums_are_reported_with_the_first_bad_element():
    text = read("gpu2_run1.log")
    bad = json.dumps({"bytes": 1048576, "elements": 262144, "event": "result", "phase": "first", "rank": 1,
                      "mismatches": 131072, "first_mismatch": {"index": 4, "got": 3.0, "expected": 11.0}})
    lines = [line for line in text.splitlines()
             if not ('"bytes": 1048576' in line and '"rank": 1' in line and '"phase": "first"' in line)]
    text = "\n".join(lines + [MARKER + bad])
    facts = summarize(parse_events(text), parse_nccl_log(text), 0, False, 180)
    assert not facts["ok"] and facts["failure"]["kind"] == "wrong_result"
    assert "131072 wrong elements at 1048576 bytes" in facts["failure"]["msg"]
    assert "element 4 on rank 1, got 3.0, expected 11.0" in facts["failure"]["msg"]
    assert [r["correct"] for r in facts["results"]] == [True, True, False, True, True]
    assert any("1048576 B: 131072 wrong" in line for line in evidence(facts))


def test_a_rank_that_never_reported_is_not_counted_correct():
    text = "\n".join(line for line in read("gpu2_run1.log").splitlines()
                     if not ('"rank": 1' in line and '"phase": "after"' in line))
    facts = summarize(parse_events(text), parse_nccl_log(text), 0, False, 180)
    assert not facts["ok"] and all(not r["complete"] for r in facts["results"])


def test_broken_event_line_is_an_error():
    with pytest.raises(AllreduceCheckError, match="line 2"):
        parse_events("NCCL INFO x\n" + MARKER + "{not json\n")


@pytest.mark.parametrize("size, time_us, ranks, busbw", [
    (268435456, 1000.0, 2, 268.435456),
    (268435456, 1000.0, 8, 469.762048),
    (4096, 10.0, 1, 0.0),
])
def test_bus_bandwidth_follows_nccl_tests(size, time_us, ranks, busbw):
    algbw, bus = bandwidth(size, time_us, ranks)
    assert algbw == pytest.approx(size / time_us / 1e3)
    assert bus == pytest.approx(busbw)


def test_worker_without_torch_says_so(tmp_path):
    worker = tmp_path / "worker.py"
    import inspect
    worker.write_text(inspect.getsource(_nccl_allreduce_worker))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "empty"))
    proc = subprocess.run([sys.executable, "-S", str(worker)], env=env, stdout=subprocess.PIPE,
                          universal_newlines=True, check=False)
    events = parse_events(proc.stdout)
    if events[0]["event"] == "start":
        pytest.skip("this interpreter has torch")
    assert proc.returncode == 3 and events[0]["kind"] == "torch_missing"
