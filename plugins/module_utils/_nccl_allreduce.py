# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the all-reduce job with a hard timeout and turn its output into facts.

The job itself is _nccl_allreduce_worker.py (run with the interpreter that holds
torch; _bounded_run.py runs it within its timeout). Here: the command line, the parser of
the job's JSON lines and of NCCL's INFO log, and the bandwidth arithmetic of
nccl-tests (bus bandwidth = algorithm bandwidth x 2(n-1)/n for all-reduce).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import re

MARKER = "@@inferops-allreduce "

# "vm:1319:1319 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"; NCCL's network
# transport names the side: "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0".
_CHANNEL_RE = re.compile(r"NCCL INFO Channel (\d+)/\d+ : (\d+)\[\d+\] -> (\d+)\[\d+\] "
                         r"(?:\[(?:send|receive)\] )?via (\S+)")
_VERSION_RE = re.compile(r"NCCL INFO NCCL version (\S+)")

DEFAULT_SIZES = (4096, 1048576, 67108864)

FAILURE_TEXT = {
    "torch_missing": "torch is not installed for the interpreter the check runs with",
    "no_cuda": "torch sees no CUDA device",
    "gpu_not_visible": "fewer GPUs are visible than the check was asked to use",
    "bad_argument": "the job was given an argument it cannot use",
    "worker_failed": "a rank of the all-reduce job failed",
    "timeout": "the all-reduce did not finish in time (a hung collective); the process group was killed",
    "wrong_result": "the all-reduce returned wrong sums",
    "no_output": "the job ended without a result",
}


class AllreduceCheckError(Exception):
    """Output of the job that cannot be read."""


def worker_argv(python, worker_path, world_size, sizes, iters, warmup, init_timeout, inject_wrong=None):
    argv = [python, worker_path,
            "--world-size", str(int(world_size or 0)),
            "--sizes", ",".join(str(int(size)) for size in sizes),
            "--iters", str(int(iters)),
            "--warmup", str(int(warmup)),
            "--init-timeout", str(int(init_timeout))]
    if inject_wrong:
        argv += ["--inject-wrong", "%d:%d" % (int(inject_wrong["rank"]), int(inject_wrong["index"]))]
    return argv


def inject_wrong_problem(inject_wrong, sizes):
    """Why the module's inject_wrong could never change an element, or None.

    The job itself refuses a rank beyond its ranks; only it knows how many GPUs it sees.
    """
    if not inject_wrong:
        return None
    if inject_wrong["rank"] < 0 or inject_wrong["index"] < 0:
        return "inject_wrong.rank and inject_wrong.index must not be negative (got %s and %s)." % (
            inject_wrong["rank"], inject_wrong["index"])
    largest = max(max(1, int(size) // 4) for size in sizes)
    if inject_wrong["index"] >= largest:
        return ("inject_wrong.index is %d but the largest size holds %d float32 elements; "
                "name an element below that." % (inject_wrong["index"], largest))
    return None


def parse_events(text):
    """The job's JSON events, in order; other lines (NCCL's log) are skipped."""
    events = []
    for number, line in enumerate(text.splitlines(), 1):
        at = line.find(MARKER)
        if at < 0:
            continue
        try:
            event = json.loads(line[at + len(MARKER):])
        except ValueError as exc:
            raise AllreduceCheckError("line %d of the job's output is not JSON (%s): %s" % (number, exc, line[:200]))
        if not isinstance(event, dict) or "event" not in event:
            raise AllreduceCheckError("line %d of the job's output is not an event: %s" % (number, line[:200]))
        events.append(event)
    return events


def parse_nccl_log(text):
    """NCCL version and the transport of every channel connection from NCCL_DEBUG=INFO lines."""
    version = None
    connections = {}
    for line in text.splitlines():
        if version is None:
            match = _VERSION_RE.search(line)
            if match:
                version = match.group(1)
                continue
        match = _CHANNEL_RE.search(line)
        if match:
            channel, src, dst, via = match.groups()
            connections[(int(src), int(dst), int(channel))] = via
    transports = {}
    for (src, dst, _channel), via in connections.items():
        transports.setdefault(via.split("/")[0], set()).add((src, dst))
    return {
        "version": version,
        "transports": sorted(transports),
        "connections": [{"from": src, "to": dst, "transport": kind}
                        for kind, pairs in sorted(transports.items()) for src, dst in sorted(pairs)],
    }


def bandwidth(size_bytes, time_us, ranks):
    """nccl-tests' algorithm and bus bandwidth of one all-reduce, in GB/s (10^9 bytes)."""
    if not time_us or time_us <= 0:
        return None, None
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    busbw = algbw * 2.0 * (ranks - 1) / ranks if ranks else 0.0
    return algbw, busbw


def _round(value, digits=3):
    return None if value is None else round(value, digits)


def summarize(events, nccl, rc, timed_out, timeout):
    """Facts from the events of one run: per-size results, P2P, and whether the check passed."""
    start = next((e for e in events if e["event"] == "start"), {})
    error = next((e for e in events if e["event"] == "error"), None)
    devices = [e for e in events if e["event"] == "device"]
    p2p = next((e.get("matrix") for e in events if e["event"] == "p2p"), None)
    world = start.get("world_size") or len(devices)
    injected = None
    if start.get("inject_wrong"):
        injected = {"rank": start["inject_wrong"][0], "index": start["inject_wrong"][1]}
    by_size = {}
    for event in events:
        if event["event"] == "result":
            row = by_size.setdefault(event["bytes"], _empty_row(event))
            row["ranks_checked"].add((event["rank"], event["phase"]))
            if event.get("mismatches"):
                row["mismatches"] += event["mismatches"]
                if row["first_mismatch"] is None and event.get("first_mismatch"):
                    row["first_mismatch"] = dict(event["first_mismatch"], rank=event["rank"], phase=event["phase"])
        elif event["event"] == "timing":
            row = by_size.setdefault(event["bytes"], _empty_row(event))
            row["time_us"] = event["time_us"]
            row["iters"] = event.get("iters")
    results = []
    for size in sorted(by_size):
        row = by_size[size]
        algbw, busbw = bandwidth(size, row["time_us"], world)
        complete = len(row["ranks_checked"]) == 2 * world if world else False
        results.append({
            "bytes": size,
            "elements": row["elements"],
            "dtype": "float32",
            "correct": complete and row["mismatches"] == 0,
            "complete": complete,
            "mismatches": row["mismatches"],
            "first_mismatch": row["first_mismatch"],
            "iters": row["iters"],
            "time_us": _round(row["time_us"]),
            "algbw_gbps": _round(algbw),
            "busbw_gbps": _round(busbw),
        })
    done = any(e["event"] == "done" for e in events)
    wrong = [r for r in results if r["mismatches"]]
    p2p_pairs = None
    if p2p:
        p2p_pairs = all(all(row) for row in p2p)
    failure = None
    if timed_out:
        failure = {"kind": "timeout", "msg": "%s after %s s" % (FAILURE_TEXT["timeout"], timeout)}
    elif error is not None:
        failure = {"kind": error.get("kind", "worker_failed"),
                   "msg": "%s: %s" % (FAILURE_TEXT.get(error.get("kind"), "the job failed"), error.get("msg", ""))}
    elif wrong:
        first = wrong[0]
        failure = {"kind": "wrong_result",
                   "msg": "%s: %d wrong %s at %d bytes (first: element %s on rank %s, got %s, expected %s)" % (
                       FAILURE_TEXT["wrong_result"], first["mismatches"],
                       "element" if first["mismatches"] == 1 else "elements", first["bytes"],
                       first["first_mismatch"]["index"], first["first_mismatch"]["rank"],
                       first["first_mismatch"]["got"], first["first_mismatch"]["expected"])}
        if injected:
            # Nobody reading a history entry later should take a planted fault for the hardware's.
            failure["msg"] += "; inject_wrong was set: element %d of rank %d was made wrong on purpose" % (
                injected["index"], injected["rank"])
    elif not done or rc != 0 or not results:
        failure = {"kind": "no_output", "msg": "%s (exit code %s)" % (FAILURE_TEXT["no_output"], rc)}
    return {
        "ok": failure is None and all(r["correct"] for r in results),
        "failure": failure,
        "world_size": world,
        "visible_gpus": start.get("visible"),
        "torch_version": start.get("torch"),
        "cuda_version": start.get("cuda"),
        "nccl_version": start.get("nccl") or nccl.get("version"),
        "python": start.get("python"),
        "gpus": [{"index": d["index"], "name": d.get("name"), "bus_id": d.get("bus_id")} for d in devices],
        "p2p_access": p2p,
        "p2p_all_pairs": p2p_pairs,
        "transports": nccl.get("transports", []),
        "connections": nccl.get("connections", []),
        "results": results,
        "timed_out": bool(timed_out),
        "inject_wrong": injected,
    }


def _empty_row(event):
    return {"elements": event.get("elements"), "mismatches": 0, "first_mismatch": None, "time_us": None,
            "iters": None, "ranks_checked": set()}


def evidence(facts):
    """One line per size for a failure message or a report: what was measured and whether it was right."""
    lines = []
    for row in facts.get("results", []):
        state = "ok" if row["correct"] else ("%d wrong" % row["mismatches"] if row["mismatches"] else "incomplete")
        lines.append("%d B: %s, %s us, busbw %s GB/s" % (row["bytes"], state, row["time_us"], row["busbw_gbps"]))
    if facts.get("p2p_access") is not None:
        lines.append("P2P access matrix: %s" % json.dumps(facts["p2p_access"]))
    if facts.get("transports"):
        lines.append("NCCL transports: %s" % ", ".join(facts["transports"]))
    return lines
