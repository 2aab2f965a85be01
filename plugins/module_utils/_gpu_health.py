# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a node's GPUs are fit to serve.

Pure functions: the XML of ``nvidia-smi -q -x`` and the kernel log go in as text, a verdict
with one sentence per problem comes out. The Xid lines are read by the node metrics
collector's parser (_gpu_textfile), so that the gate and the alerts count the same events.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re
from xml.etree import ElementTree

from ansible_collections.inferops.serving.plugins.module_utils._gpu_textfile import xid_events
from ansible_collections.inferops.serving.plugins.module_utils._topology.common import normalize_bus_id

# 48 double-bit ECC, 79 fallen off the bus, 95 uncontained ECC, 119 GSP timeout, 154 the
# driver asks for a reset or a reboot (a 154 back to "None" is the recovery, not a fault).
DEFAULT_FATAL_XIDS = (48, 79, 95, 119, 154)
XID_RECOVERY_ACTION_CHANGED = 154

RESET = "reset the GPU (nvidia-smi -r, or on a Proxmox VM the host resets the device / power-cycles the VM)"
REBOOT = "reboot the node (on a Proxmox VM, a power cycle from the host)"
REPLACE = "replace or RMA the GPU"
DRAIN = ("stop every process that moves data peer-to-peer on it (the SGLang server), then run this check again: "
         "the driver then names the next step")
INVESTIGATE = "look the value up in NVIDIA's Xid catalog before serving from this GPU"

# The node's action is the first of these that any problem asks for.
ACTIONS = ("replace", "reboot", "reset", "investigate", "drain", "configure", "none")

# What nvidia-smi prints for a reading the GPU or the driver does not offer.
_NOT_AVAILABLE = ("", "n/a", "[n/a]", "not supported", "[not supported]", "requested functionality has been deprecated")
# nvidia-smi writes an error text in place of a reading it failed to retrieve.
_READ_ERROR = re.compile(r"error|insufficient permissions|not found|unknown", re.IGNORECASE)
# `GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)` (Xid 154).
_ACTION_CHANGED = re.compile(r"to 0x([0-9a-fA-F]+) \(([^)]*)\)")

_XID_MEANING = {
    48: ("an uncorrectable double-bit ECC error", "reset",
         "%s so the driver retires or remaps the memory; %s if it comes back" % (RESET, REPLACE)),
    79: ("the GPU fell off the bus", "reboot",
         "%s; if it happens again, check the GPU's power and seating" % REBOOT),
    95: ("an uncontained ECC error: a process may have read corrupt memory", "reset", RESET),
    119: ("the GPU's GSP firmware stopped answering", "reset", "%s; %s if the reset fails" % (RESET, REBOOT)),
}
# A reboot empties the kernel log; a reset does not, so the line would keep failing the check.
_XID_STAYS = ("; the line stays in the kernel log until the node reboots, so after a GPU reset "
              "set ignore_xids_before to the uptime of the reset")


class GpuHealthError(Exception):
    """nvidia-smi output that cannot be read as ``nvidia-smi -q -x``."""


def _text(node, path):
    found = node.find(path) if node is not None else None
    if found is None or found.text is None:
        return None
    value = " ".join(found.text.split())
    return None if value.lower() in _NOT_AVAILABLE else value


def _count(value):
    return int(value) if value is not None and value.isdigit() else None


def _flag(value):
    return {"yes": True, "no": False}.get((value or "").lower())


def _uncorrectable(ecc_errors, scope):
    """Uncorrectable ECC errors counted under ``volatile`` or ``aggregate``, or None when none is given.

    R525 and later count per memory (``sram_uncorrectable*``, ``dram_uncorrectable``); older
    drivers give a ``double_bit`` block with a ``total``.
    """
    node = ecc_errors.find(scope) if ecc_errors is not None else None
    if node is None:
        return None
    counts = [_count(_text(node, "double_bit/total"))]
    counts += [_count(_text(child, ".")) for child in node if "uncorrectable" in child.tag]
    counts = [count for count in counts if count is not None]
    return sum(counts) if counts else None


def _gpu_readings(gpu):
    ecc_errors = gpu.find("ecc_errors")
    retired = gpu.find("retired_pages")
    remapped = gpu.find("remapped_rows")
    retired_paths = ("multiple_single_bit_retirement/retired_count", "double_bit_retirement/retired_count")
    retired_counts = [_count(_text(retired, path)) for path in retired_paths]
    pending_pages = [_flag(_text(retired, path)) for path in ("pending_retirement", "pending_blacklist")]
    return {
        "persistence_mode": _text(gpu, "persistence_mode"),
        "recovery_action": _text(gpu, "gpu_recovery_action"),
        # Drivers before R570 say it in two flags instead of the recovery action.
        "reset_required": _flag(_text(gpu, "gpu_reset_status/reset_required")),
        "drain_and_reset_recommended": _flag(_text(gpu, "gpu_reset_status/drain_and_reset_recommended")),
        "ecc_mode": _text(gpu, "ecc_mode/current_ecc"),
        "ecc_mode_pending": _text(gpu, "ecc_mode/pending_ecc"),
        "ecc_uncorrectable_volatile": _uncorrectable(ecc_errors, "volatile"),
        "ecc_uncorrectable_aggregate": _uncorrectable(ecc_errors, "aggregate"),
        "sram_threshold_exceeded": _flag(_text(ecc_errors, "aggregate/sram_threshold_exceeded")),
        "memory_repair_pending": any(_flag(_text(ecc_errors, path)) for path in ("channel_repair_pending",
                                                                                 "tpc_repair_pending")),
        "unrepairable_memory": _flag(_text(ecc_errors, "unrepairable_memory")),
        "retired_pages": sum(count for count in retired_counts if count) if any(
            count is not None for count in retired_counts) else None,
        "retired_pages_pending": True if True in pending_pages else (False if False in pending_pages else None),
        "remapped_rows_correctable": _count(_text(remapped, "remapped_row_corr")),
        "remapped_rows_uncorrectable": _count(_text(remapped, "remapped_row_unc")),
        "remapped_rows_pending": _flag(_text(remapped, "remapped_row_pending")),
        "remapping_failure": _flag(_text(remapped, "remapped_row_failure")),
    }


def parse_smi_xml(text):
    """{driver_version, attached_gpus, gpus} from ``nvidia-smi -q -x``; GPUs in nvidia-smi index order.

    Raises GpuHealthError on anything that is not that XML, so that an error text never passes
    for a node without faults.
    """
    if not (text or "").strip():
        raise GpuHealthError("nvidia-smi -q -x printed nothing")
    try:
        root = ElementTree.fromstring(text.strip())
    except ElementTree.ParseError as exc:
        raise GpuHealthError("the output of nvidia-smi -q -x is not XML (%s); it begins %r" % (exc, text.strip()[:160]))
    if root.tag != "nvidia_smi_log":
        raise GpuHealthError("the XML is not nvidia-smi's: its root is <%s>, not <nvidia_smi_log>" % root.tag)
    gpus = []
    # nvidia-smi -q lists the GPUs in index order; the XML carries no index of its own.
    for index, gpu in enumerate(root.findall("gpu")):
        bus_id = _text(gpu, "pci/pci_bus_id") or gpu.get("id")
        if not bus_id:
            raise GpuHealthError("GPU %d in the XML has no bus id (no <pci_bus_id>, no id attribute)" % index)
        entry = {"index": index, "bus_id": normalize_bus_id(bus_id), "name": _text(gpu, "product_name"),
                 "uuid": _text(gpu, "uuid")}
        entry.update(_gpu_readings(gpu))
        gpus.append(entry)
    return {"driver_version": _text(root, "driver_version"),
            "attached_gpus": _count(_text(root, "attached_gpus")), "gpus": gpus}


def _recovery_step(action_name):
    """(action, what to do) for a recovery action as nvidia-smi or an Xid 154 line names it."""
    words = action_name.lower()
    if "reboot" in words:
        return "reboot", REBOOT
    if "reset" in words or "flr" in words:
        if "drain" in words:
            return "reset", "%s once the processes on it have ended" % RESET
        return "reset", RESET
    if "drain" in words:
        return "drain", DRAIN
    return "investigate", INVESTIGATE


def _finding(check, severity, action, summary, message):
    return {"check": check, "severity": severity, "action": action, "summary": summary, "message": message}


def _xid_findings(xids, fatal_xids):
    """Findings for the fatal Xids among ``xids`` ({xid: [events]}) of one GPU, and the per-code summary."""
    findings = []
    summary = []
    for xid in sorted(xids):
        events = xids[xid]
        fatal = xid in fatal_xids
        last = events[-1]
        summary.append({"xid": xid, "count": len(events), "fatal": fatal, "last_detail": last["detail"]})
        if not fatal:
            continue
        times = "once" if len(events) == 1 else "%d times" % len(events)
        if xid == XID_RECOVERY_ACTION_CHANGED:
            changed = _ACTION_CHANGED.search(last["detail"])
            if changed and int(changed.group(1), 16) == 0:
                # The driver's own word that the GPU recovered.
                summary[-1]["fatal"] = False
                continue
            target = changed.group(2) if changed else "unknown"
            action, step = _recovery_step(target)
            meaning = "the driver changed the recovery action to '%s'" % target
        elif xid in _XID_MEANING:
            meaning, action, step = _XID_MEANING[xid]
        else:
            meaning, action, step = "listed in fatal_xids", "investigate", (
                "look it up in NVIDIA's Xid catalog; a GPU reset or a reboot of the node clears most")
        findings.append(_finding("xid", "problem", action, "Xid %d" % xid, "Xid %d (%s) %s since boot; %s%s" % (
            xid, meaning, times, step, "" if action == "reboot" else _XID_STAYS)))
    return findings, summary


def _gpu_findings(gpu, require_persistence_mode):
    findings = []
    action_name = gpu["recovery_action"]
    if action_name and action_name.lower() != "none":
        if _READ_ERROR.search(action_name) and _recovery_step(action_name)[0] == "investigate":
            findings.append(_finding("recovery_action", "warning", "none", "recovery action unreadable",
                                     "nvidia-smi could not read the recovery action ('%s')" % action_name))
        else:
            action, step = _recovery_step(action_name)
            findings.append(_finding("recovery_action", "problem", action, "recovery action %s" % action_name,
                                     "the driver asks for recovery action '%s'; %s" % (action_name, step)))
    elif gpu["reset_required"] or gpu["drain_and_reset_recommended"]:
        findings.append(_finding("recovery_action", "problem", "reset", "reset required",
                                 "the driver flags the GPU for a reset; %s" % RESET))
    if gpu["remapping_failure"]:
        findings.append(_finding("row_remapping_failure", "problem", "replace", "row remapping failed",
                                 "the GPU could not remap a failing memory row (NVIDIA's RMA criterion); %s" % REPLACE))
    elif gpu["remapped_rows_pending"]:
        findings.append(_finding("row_remapping_pending", "problem", "reset", "row remapping pending",
                                 "a failing memory row waits to be remapped; a GPU reset applies the pending row "
                                 "remapping: %s" % RESET))
    if gpu["unrepairable_memory"] or gpu["sram_threshold_exceeded"]:
        what = "memory it cannot repair" if gpu["unrepairable_memory"] else "more SRAM errors than NVIDIA's threshold"
        findings.append(_finding("unrepairable_memory", "problem", "replace", "unrepairable memory",
                                 "the GPU reports %s; %s" % (what, REPLACE)))
    elif gpu["memory_repair_pending"]:
        findings.append(_finding("memory_repair_pending", "problem", "reset", "memory repair pending",
                                 "a memory repair waits for the next reset; %s" % RESET))
    volatile = gpu["ecc_uncorrectable_volatile"]
    aggregate = gpu["ecc_uncorrectable_aggregate"]
    if volatile:
        # A reset lets the driver remap or retire the memory; NVIDIA asks for an RMA only when that fails.
        findings.append(_finding("ecc_uncorrectable", "problem", "reset", "%d uncorrectable ECC" % volatile,
                                 "%d uncorrectable ECC error(s) since the driver loaded: results computed on it may "
                                 "be wrong; %s, and %s if they come back after the reset" % (volatile, RESET, REPLACE)))
    elif aggregate:
        findings.append(_finding("ecc_uncorrectable_lifetime", "warning", "none",
                                 "%d uncorrectable ECC over its life" % aggregate,
                                 "%d uncorrectable ECC error(s) over the GPU's life, none since the driver loaded; "
                                 "%s if they recur" % (aggregate, REPLACE)))
    if gpu["retired_pages_pending"]:
        findings.append(_finding("retired_pages_pending", "problem", "reset", "page retirement pending",
                                 "memory pages wait to be retired; %s to retire them" % RESET))
    if gpu["ecc_mode"] and gpu["ecc_mode"].lower() == "disabled":
        findings.append(_finding("ecc_mode", "warning", "none", "ECC off",
                                 "ECC is off, so memory errors go unnoticed; nvidia-smi -e 1 and a reboot turn it on"))
    elif gpu["ecc_mode_pending"] and gpu["ecc_mode"] and gpu["ecc_mode_pending"] != gpu["ecc_mode"]:
        findings.append(_finding("ecc_mode", "warning", "none", "ECC change pending",
                                 "ECC is %s and becomes %s at the next reboot" % (gpu["ecc_mode"], gpu["ecc_mode_pending"])))
    if gpu["persistence_mode"] and gpu["persistence_mode"].lower() == "disabled":
        findings.append(_finding("persistence_mode", "problem" if require_persistence_mode else "warning",
                                 "configure" if require_persistence_mode else "none", "persistence mode off",
                                 "persistence mode is off; enable it (nvidia-persistenced, or nvidia-smi -pm 1) so "
                                 "the driver keeps the GPU initialised between processes"))
    return findings


def _label(gpu):
    return "GPU %d (%s, %s)" % (gpu["index"], gpu["bus_id"], gpu["name"] or "unnamed")


def _node_action(findings):
    asked = set(finding["action"] for finding in findings if finding["severity"] == "problem")
    return next((action for action in ACTIONS if action in asked), "none")


def assess(smi_xml, kernel_log=None, expected_gpu_count=None, fatal_xids=DEFAULT_FATAL_XIDS,
           require_persistence_mode=False, ignore_xids_before=None, smi_failure=None):
    """The health of a node's GPUs.

    ``kernel_log`` None means it could not be read: Xids are then not checked, which the result
    says. ``ignore_xids_before`` (seconds since boot) leaves out Xid lines stamped at or before
    it; lines without a timestamp always count. ``smi_failure`` is what nvidia-smi said when it
    exited non-zero but still printed XML. Raises GpuHealthError when ``smi_xml`` is unreadable.
    """
    parsed = parse_smi_xml(smi_xml)
    fatal = set(fatal_xids)
    by_bus = {}
    for event in xid_events(kernel_log):
        if ignore_xids_before is not None and event["uptime"] is not None and event["uptime"] <= ignore_xids_before:
            continue
        by_bus.setdefault(event["bus_id"], {}).setdefault(event["xid"], []).append(event)

    gpus = []
    every_finding = []
    for gpu in parsed["gpus"]:
        findings = _gpu_findings(gpu, require_persistence_mode)
        xid_found, xid_summary = _xid_findings(by_bus.pop(gpu["bus_id"], {}), fatal)
        findings = xid_found + findings
        for finding in findings:
            finding["message"] = "%s: %s." % (_label(gpu), finding["message"])
            finding["summary"] = "GPU %d %s" % (gpu["index"], finding["summary"])
        every_finding += findings
        entry = dict((key, gpu[key]) for key in ("index", "bus_id", "name", "uuid"))
        entry["readings"] = dict((key, value) for key, value in gpu.items() if key not in entry)
        entry["xids"] = xid_summary
        entry["findings"] = findings
        gpus.append(entry)

    node_findings = []
    for bus_id in sorted(by_bus):
        for finding in _xid_findings(by_bus[bus_id], fatal)[0]:
            finding["message"] = "GPU %s, which nvidia-smi does not list: %s." % (bus_id, finding["message"])
            finding["summary"] = "%s %s" % (bus_id, finding["summary"])
            node_findings.append(finding)
    count = len(gpus)
    if expected_gpu_count is not None and count < expected_gpu_count:
        node_findings.append(_finding(
            "gpu_count", "problem", "reboot", "%d of %d GPUs" % (count, expected_gpu_count),
            "nvidia-smi lists %d of the %d GPUs expected: a GPU fell off the bus, was not passed through to the VM "
            "or failed to initialise; read the kernel log, then %s." % (count, expected_gpu_count, REBOOT)))
    elif expected_gpu_count is not None and count > expected_gpu_count:
        node_findings.append(_finding(
            "gpu_count", "warning", "none", "%d GPUs, %d expected" % (count, expected_gpu_count),
            "nvidia-smi lists %d GPUs, more than the %d expected; set the expected count to match." % (
                count, expected_gpu_count)))
    if parsed["attached_gpus"] is not None and parsed["attached_gpus"] > count:
        node_findings.append(_finding(
            "gpu_count", "problem", "reboot", "%d of %d attached GPUs described" % (count, parsed["attached_gpus"]),
            "nvidia-smi counts %d attached GPUs but describes only %d: the driver lost one; %s."
            % (parsed["attached_gpus"], count, REBOOT)))
    if smi_failure:
        node_findings.append(_finding("nvidia_smi", "problem", "investigate", "nvidia-smi failed",
                                      "nvidia-smi -q -x reported an error: %s." % smi_failure))
    if kernel_log is None:
        node_findings.append(_finding("kernel_log", "warning", "none", "kernel log not read",
                                      "the kernel log could not be read, so Xid errors were not checked."))
    every_finding += node_findings
    return _verdict(parsed, gpus, node_findings, every_finding, expected_gpu_count, sorted(fatal), kernel_log)


def _verdict(parsed, gpus, node_findings, every_finding, expected_gpu_count, fatal_xids, kernel_log):
    problems = [finding for finding in every_finding if finding["severity"] == "problem"]
    warnings = [finding for finding in every_finding if finding["severity"] == "warning"]
    names = sorted(set(gpu["name"] or "unnamed" for gpu in gpus))
    if problems:
        action = _node_action(problems)
        verdict = "unhealthy (%s): %s" % (action, "; ".join(finding["summary"] for finding in problems))
    else:
        action = "none"
        verdict = "healthy: %d GPU%s (%s) fit to serve" % (
            len(gpus), "" if len(gpus) == 1 else "s", ", ".join(names) or "none")
        if warnings:
            verdict += "; %d warning%s: %s" % (len(warnings), "" if len(warnings) == 1 else "s",
                                               "; ".join(finding["summary"] for finding in warnings))
    return {
        "healthy": not problems,
        "verdict": verdict,
        "action": action,
        "problems": [finding["message"] for finding in problems],
        "gpu_warnings": [finding["message"] for finding in warnings],
        "gpus": gpus,
        "node_findings": node_findings,
        "gpu_count": len(gpus),
        "expected_gpu_count": expected_gpu_count,
        "driver_version": parsed["driver_version"],
        "fatal_xids": fatal_xids,
        "xids_checked": kernel_log is not None,
    }
