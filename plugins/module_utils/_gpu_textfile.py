# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU and serving metrics for the node exporter's textfile collector.

Pure functions: nvidia-smi's CSV, the kernel log and the node's history go in as
text, Prometheus exposition text comes out. The node_metrics role installs this
file (with the two it imports) on every GPU node, where a systemd timer feeds it
and writes the result atomically into the textfile directory.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

from ansible_collections.inferops.serving.plugins.module_utils._history import parse_history
from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    TopologyError,
    normalize_bus_id,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.query_gpu import parse_query_gpu

# What the collector asks nvidia-smi for (`--format=csv,nounits`); the header names the columns.
QUERY_FIELDS = ("index", "pci.bus_id", "name", "power.draw", "power.limit", "utilization.gpu",
                "memory.used", "memory.total", "temperature.gpu")

MIB = 1024 * 1024

# `NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.`; drivers before R450
# leave out the `PCI:` prefix, the kernel may prefix its timestamp, and an error inside a MIG
# instance names it after the bus (`PCI:0000:01:00 GPU-I:05`).
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.([0-7]))?"
                  r"(?: GPU-I:[0-9a-fA-F]+)?\): (\d+)(?:, *([^\n]*))?")
# `[ 1843.101203]` (dmesg, journalctl -o short-monotonic, syslog after `kernel:`): seconds since boot.
_UPTIME = re.compile(r"\[\s*(\d+\.\d+)\]")
# Newer drivers print a GPU that fell off the bus without an Xid line, over several lines.
_FALLEN_OFF = re.compile(r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])[^\n]*\n"
                         r"(?:[^\n]*\n){0,3}?[^\n]*fallen off the bus")
XID_FALLEN_OFF_THE_BUS = 79
# A number, with the unit nvidia-smi appends unless asked for `nounits`.
_NUMBER = re.compile(r"^(-?[0-9]+(?:\.[0-9]+)?)(?:\s*(?:MiB|W|%|C))?$")

# name -> (type, help); the order is the order of the output.
METRICS = (
    ("inferops_gpu_query_success", "gauge", "1 when nvidia-smi answered and its output was read, else 0."),
    ("inferops_gpu_power_draw_watts", "gauge", "Power drawn by the GPU (nvidia-smi power.draw)."),
    ("inferops_gpu_power_limit_watts", "gauge", "Enforced power limit of the GPU (nvidia-smi power.limit)."),
    ("inferops_gpu_utilization_ratio", "gauge", "Share of time a kernel ran on the GPU, 0 to 1 (utilization.gpu)."),
    ("inferops_gpu_memory_used_bytes", "gauge", "GPU memory in use (memory.used)."),
    ("inferops_gpu_memory_total_bytes", "gauge", "GPU memory in total (memory.total)."),
    ("inferops_gpu_temperature_celsius", "gauge", "GPU core temperature (temperature.gpu)."),
    ("inferops_gpu_xid_errors_total", "counter", "NVIDIA Xid errors in the kernel log since boot, by GPU and Xid code."),
    ("inferops_gpu_healthy", "gauge",
     "1 when the GPUs are fit to serve as the server's GPU health gate judges them (gpu_health), else 0."),
    ("inferops_gpu_health_problem", "gauge",
     "1 for each problem the GPU health check finds, by GPU, check and the step it asks for."),
    ("inferops_sglang_health_up", "gauge", "1 when the SGLang server's /health answered 200 on the node, else 0."),
    ("inferops_sglang_baseline_output_throughput_tokens_per_second", "gauge",
     "Output throughput of the last benchmark of the baseline (no experiment) in the node's history."),
    ("inferops_sglang_baseline_concurrency", "gauge", "Requests in flight during that benchmark."),
    ("inferops_sglang_baseline_timestamp_seconds", "gauge", "When that benchmark was recorded (Unix time)."),
    ("inferops_textfile_last_run_timestamp_seconds", "gauge", "When the collector last wrote this file (Unix time)."),
)


class GpuTextfileError(Exception):
    """nvidia-smi output that cannot be read as the collector's query."""


def _number(value):
    if value is None:
        return None
    match = _NUMBER.match(str(value).strip())
    return float(match.group(1)) if match else None


def parse_gpu_query(text):
    """GPUs from ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,nounits``.

    The header names the columns (nvidia-smi keeps units in it even with ``nounits``);
    sensors a GPU or VM does not expose ([N/A], [Not Supported]) come back as None.
    The parsing of the CSV itself is the topology module's.
    """
    header = next((line for line in text.splitlines() if line.strip()), "")
    names = [re.sub(r"\s*\[[^\]]*\]\s*$", "", cell.strip()).lower() for cell in header.split(",")]
    missing = [field for field in QUERY_FIELDS if field not in names]
    if missing:
        raise GpuTextfileError("nvidia-smi output has no column %s; expected a header with %s"
                               % (", ".join(missing), ",".join(QUERY_FIELDS)))
    try:
        parsed = parse_query_gpu(text)
    except TopologyError as exc:
        raise GpuTextfileError(str(exc))
    rows = []
    body = [line for line in text.splitlines() if line.strip()][1:]
    for line in body:
        cells = [cell.strip() for cell in line.split(",")]
        rows.append(dict(zip(names, cells)))
    gpus = []
    for gpu, row in zip(parsed["gpus"], sorted(rows, key=lambda r: int(r["index"]))):
        utilization = _number(row.get("utilization.gpu"))
        used = _number(row.get("memory.used"))
        total = _number(row.get("memory.total"))
        gpus.append({
            "index": gpu["index"],
            "bus_id": gpu["pci_bus_id"],
            "name": gpu["name"],
            "power_draw_w": _number(row.get("power.draw")),
            "power_limit_w": _number(row.get("power.limit")),
            "utilization_ratio": None if utilization is None else utilization / 100.0,
            "memory_used_bytes": None if used is None else int(used) * MIB,
            "memory_total_bytes": None if total is None else int(total) * MIB,
            "temperature_c": _number(row.get("temperature.gpu")),
        })
    return gpus


def _uptime_before(text, position):
    """Seconds since boot stamped on the line that holds ``position``, or None."""
    line = text[text.rfind("\n", 0, position) + 1:position]
    stamps = _UPTIME.findall(line)
    return float(stamps[-1]) if stamps else None


def xid_events(kernel_log):
    """The NVIDIA Xid events of a kernel log, in log order.

    Each is a dict: ``bus_id`` (``0000:3b:00.0``), ``xid``, ``detail`` (the driver's text after
    the code), ``uptime`` (seconds since boot from the line's timestamp, None without one) and
    ``inferred``: True for a GPU reported as fallen off the bus without an Xid line, which
    stands for Xid 79.
    """
    text = kernel_log or ""
    found = []
    for match in _XID.finditer(text):
        found.append((match.start(), {
            "bus_id": normalize_bus_id("%s.%s" % (match.group(1), match.group(2) or "0")),
            "xid": int(match.group(3)),
            "detail": (match.group(4) or "").strip(),
            "uptime": _uptime_before(text, match.start()),
            "inferred": False,
        }))
    for match in _FALLEN_OFF.finditer(text):
        found.append((match.start(), {
            "bus_id": normalize_bus_id(match.group(1)),
            "xid": XID_FALLEN_OFF_THE_BUS,
            "detail": "fallen off the bus and is not responding to commands",
            "uptime": _uptime_before(text, match.start()),
            "inferred": True,
        }))
    return [event for _position, event in sorted(found, key=lambda item: item[0])]


def count_xids(kernel_log):
    """{(bus_id, xid): count} of the NVIDIA Xid lines in a kernel log.

    A GPU reported as fallen off the bus without an Xid line counts as Xid 79 once.
    """
    counts = {}
    inferred = []
    for event in xid_events(kernel_log):
        key = (event["bus_id"], event["xid"])
        if event["inferred"]:
            inferred.append(key)
        else:
            counts[key] = counts.get(key, 0) + 1
    for key in inferred:
        counts.setdefault(key, 1)
    return counts


def last_baseline(history_text):
    """The newest benchmark without an experiment that has a throughput, or None."""
    records, _skipped = parse_history(history_text or "")
    for record in reversed(records):
        if record.get("event") != "benchmark" or record.get("experiment"):
            continue
        metrics = record.get("metrics") or {}
        throughput = metrics.get("output_throughput")
        if isinstance(throughput, (int, float)) and not isinstance(throughput, bool) and throughput > 0:
            return {"output_throughput": float(throughput), "concurrency": metrics.get("concurrency"),
                    "epoch": record.get("epoch")}
    return None


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels):
    if not labels:
        return ""
    return "{" + ",".join('%s="%s"' % (key, _escape(value)) for key, value in labels) + "}"


def _value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _health_problems(gpu_health):
    """One sample per problem finding; a finding of no listed GPU has an empty ``gpu`` label."""
    problems = []
    owners = [(gpu["index"], gpu["bus_id"], gpu["findings"]) for gpu in gpu_health.get("gpus", [])]
    owners.append(("", "", gpu_health.get("node_findings", [])))
    for index, bus_id, findings in owners:
        for finding in findings:
            if finding["severity"] == "problem":
                labels = (("gpu", index), ("bus_id", bus_id), ("check", finding["check"]),
                          ("action", finding["action"]))
                if (labels, 1) not in problems:
                    problems.append((labels, 1))
    return problems


def render(gpus=None, gpu_error=None, xids=None, health_up=None, baseline=None, now=None, gpu_health=None):
    """Prometheus text exposition of what was read; absent readings leave their series out.

    ``gpus`` None means nvidia-smi was not asked (a node without GPUs); ``gpu_error``
    says it was asked and failed, which the success gauge reports as 0. ``gpu_health`` is
    _gpu_health.assess's result, or ``{"healthy": False}`` when it could not be computed
    (the gate fails then too).
    """
    samples = dict((name, []) for name, _type, _help in METRICS)
    if gpus is not None or gpu_error is not None:
        samples["inferops_gpu_query_success"].append(((), gpu_error is None))
    bus_to_index = {}
    for gpu in gpus or []:
        labels = (("gpu", gpu["index"]), ("bus_id", gpu["bus_id"]), ("name", gpu["name"] or ""))
        bus_to_index[gpu["bus_id"]] = gpu["index"]
        for name, key in (("inferops_gpu_power_draw_watts", "power_draw_w"),
                          ("inferops_gpu_power_limit_watts", "power_limit_w"),
                          ("inferops_gpu_utilization_ratio", "utilization_ratio"),
                          ("inferops_gpu_memory_used_bytes", "memory_used_bytes"),
                          ("inferops_gpu_memory_total_bytes", "memory_total_bytes"),
                          ("inferops_gpu_temperature_celsius", "temperature_c")):
            if gpu[key] is not None:
                samples[name].append((labels, gpu[key]))
    for (bus_id, xid), count in sorted((xids or {}).items()):
        gpu = bus_to_index.get(bus_id, "")
        samples["inferops_gpu_xid_errors_total"].append(
            ((("gpu", gpu), ("bus_id", bus_id), ("xid", xid)), count))
    if gpu_health is not None:
        samples["inferops_gpu_healthy"].append(((), bool(gpu_health.get("healthy"))))
        samples["inferops_gpu_health_problem"] += _health_problems(gpu_health)
    if health_up is not None:
        samples["inferops_sglang_health_up"].append(((), bool(health_up)))
    if baseline:
        samples["inferops_sglang_baseline_output_throughput_tokens_per_second"].append(
            ((), baseline["output_throughput"]))
        if isinstance(baseline.get("concurrency"), int):
            samples["inferops_sglang_baseline_concurrency"].append(((), baseline["concurrency"]))
        if isinstance(baseline.get("epoch"), (int, float)):
            samples["inferops_sglang_baseline_timestamp_seconds"].append(((), baseline["epoch"]))
    if now is not None:
        samples["inferops_textfile_last_run_timestamp_seconds"].append(((), now))
    lines = []
    for name, kind, help_text in METRICS:
        if not samples[name]:
            continue
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples[name]:
            lines.append("%s%s %s" % (name, _labels(labels), _value(value)))
    return "\n".join(lines) + "\n"
