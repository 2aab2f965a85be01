# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`nvidia-smi -q -x` of the lab's simulated GPUs, and the GPU faults a test plants for it.

Imported by the lab's nvidia-smi (sim/nvidia-smi beside this file). The XML follows the real
tool as captured on an H200 with driver 580.159.04
(tests/unit/plugins/module_utils/fixtures/gpu_health/h200-2026-12-01/q.xml): the same root,
element names, nesting, tab indentation and spellings of values ("N/A", "Yes"/"No",
"Enabled"), reduced to the blocks that describe identity, PCI, memory, load and health.

Faults: /run/inferops-lab/gpu-faults.json (another path: INFEROPS_LAB_GPU_FAULTS), a JSON
object keyed by the GPU's slot (0 to 7, its bus 01..08 whatever nvidia-smi numbers it), e.g.

    {"0": {"recovery_action": "Reset"}, "3": {"row_remapping": "pending"}, "5": {"missing": true}}

  recovery_action        gpu_recovery_action: "Reset", "Reboot", "Drain P2P", "Drain and Reset"
  row_remapping          "pending" (a row waits for a reset) or "failed" (remapped_row_failure Yes)
  ecc_uncorrectable      uncorrectable DRAM ECC errors since the driver loaded (volatile and aggregate)
  retired_pages_pending  true: a page waits to be retired (pending_retirement Yes)
  persistence_mode       "Disabled"
  missing                true: nvidia-smi does not list the GPU at all (fell off the bus, failed to
                         initialise); the others keep their bus and are numbered without a gap

In the Proxmox lab (a guest whose /etc/inferops-lab/vm-hw names the VM hardware file the
host's qm writes), `"vm_boot_id": "<the VM's boot id>"` beside the slots ties the faults to that
start of the VM: a later start is a new QEMU process, which resets the passed-through GPUs, so
the faults are gone, as a power cycle clears them on real hardware.

An absent, empty or unreadable file means no fault. Fatal Xids are not nvidia-smi's: they are
kernel log lines, which the lab keeps in /run/inferops-lab/kernel.log (see sim/nvidia-smi).
"""

import json
import os

FAULTS_FILE = "/run/inferops-lab/gpu-faults.json"
VM_HW_KNOB = "/etc/inferops-lab/vm-hw"
FAULT_KEYS = ("recovery_action", "row_remapping", "ecc_uncorrectable", "retired_pages_pending",
              "persistence_mode", "missing")
DTD = "nvsmi_device_v13.dtd"


def vm_hardware():
    """What the lab's Proxmox host gave this VM at its last start, or None outside that lab."""
    path = os.environ.get("INFEROPS_LAB_VM_HW")
    if not path:
        try:
            with open(VM_HW_KNOB) as handle:
                path = handle.read().strip()
        except OSError:
            return None
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def faults():
    """{slot: {fault: value}} as planted; {} when nothing is, or when the VM they were planted
    on has been started again since."""
    try:
        with open(os.environ.get("INFEROPS_LAB_GPU_FAULTS") or FAULTS_FILE) as handle:
            planted = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(planted, dict):
        return {}
    if "vm_boot_id" in planted and (vm_hardware() or {}).get("boot_id") != planted["vm_boot_id"]:
        return {}
    found = {}
    for slot, values in planted.items():
        if str(slot).isdigit() and isinstance(values, dict):
            found[int(slot)] = dict((key, values[key]) for key in FAULT_KEYS if key in values)
    return found


def present_slots(count):
    """The slots nvidia-smi lists, in its index order: every slot not planted as missing."""
    planted = faults()
    return [slot for slot in range(count) if not planted.get(slot, {}).get("missing")]


def _xml_text(value):
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _render(tag, value, depth, out, attributes=""):
    indent = "\t" * depth
    if isinstance(value, list):
        out.append("%s<%s%s>" % (indent, tag, attributes))
        for child_tag, child_value in value:
            _render(child_tag, child_value, depth + 1, out)
        out.append("%s</%s>" % (indent, tag))
    else:
        out.append("%s<%s%s>%s</%s>" % (indent, tag, attributes, _xml_text(value), tag))


def _yes(flag):
    return "Yes" if flag else "No"


def _ecc_counts(uncorrectable, aggregate):
    counts = [("sram_correctable", 0), ("sram_uncorrectable_parity", 0), ("sram_uncorrectable_secded", 0),
              ("dram_correctable", 0), ("dram_uncorrectable", uncorrectable)]
    if aggregate:
        counts.append(("sram_threshold_exceeded", "No"))
    return counts


def gpu_elements(row, fault, memory_total_mib, power_limit_w):
    """The <gpu> children of one simulated GPU; ``row`` is nvidia-smi's --query-gpu view of it."""
    bus = row["pci.bus_id"]
    domain, bus_number, device_function = bus.split(":")
    ecc = int(fault.get("ecc_uncorrectable") or 0)
    remap = fault.get("row_remapping")
    retired_pending = bool(fault.get("retired_pages_pending"))
    used = row["memory.used"][0]
    return [
        ("product_name", row["name"]),
        ("product_brand", "NVIDIA RTX"),
        ("product_architecture", "Blackwell"),
        ("persistence_mode", fault.get("persistence_mode") or row["persistence_mode"]),
        ("addressing_mode", "None"),
        ("mig_mode", [("current_mig", "N/A"), ("pending_mig", "N/A")]),
        ("accounting_mode", "Disabled"),
        ("serial", row["serial"]),
        ("uuid", row["uuid"]),
        ("minor_number", row["index"]),
        ("vbios_version", "98.02.2E.00.02"),
        ("multigpu_board", "No"),
        ("gpu_virtualization_mode", [("virtualization_mode", "Pass-Through"), ("host_vgpu_mode", "N/A"),
                                     ("vgpu_heterogeneous_mode", "N/A")]),
        ("gpu_recovery_action", fault.get("recovery_action") or "None"),
        ("gsp_firmware_version", row["driver_version"]),
        ("pci", [
            ("pci_bus", bus_number),
            ("pci_device", device_function.split(".")[0]),
            ("pci_domain", domain[-4:]),
            ("pci_device_id", "2BB510DE"),
            ("pci_bus_id", bus),
            ("pci_sub_system_id", "204E10DE"),
            ("pci_gpu_link_info", [
                ("pcie_gen", [("max_link_gen", 5), ("current_link_gen", 5), ("device_current_link_gen", 5),
                              ("max_device_link_gen", 5), ("max_host_link_gen", "N/A")]),
                ("link_widths", [("max_link_width", "16x"), ("current_link_width", "16x")]),
            ]),
            ("replay_counter", 0),
            ("replay_rollover_counter", 0),
        ]),
        ("fan_speed", "N/A"),
        ("performance_state", row["pstate"]),
        ("fb_memory_usage", [("total", "%d MiB" % memory_total_mib), ("reserved", "512 MiB"),
                             ("used", "%d MiB" % used), ("free", "%d MiB" % (memory_total_mib - 512 - used))]),
        ("compute_mode", "Default"),
        ("utilization", [("gpu_util", "%d %%" % row["utilization.gpu"][0]), ("memory_util", "0 %"),
                         ("encoder_util", "0 %"), ("decoder_util", "0 %"), ("jpeg_util", "0 %"),
                         ("ofa_util", "0 %")]),
        ("ecc_mode", [("current_ecc", "Enabled"), ("pending_ecc", "Enabled")]),
        ("ecc_errors", [
            ("volatile", _ecc_counts(ecc, aggregate=False)),
            ("aggregate", _ecc_counts(ecc, aggregate=True)),
            ("aggregate_uncorrectable_sram_sources", [("sram_l2", 0), ("sram_sm", 0), ("sram_microcontroller", 0),
                                                      ("sram_pcie", 0), ("sram_other", 0)]),
            ("channel_repair_pending", "No"),
            ("tpc_repair_pending", "No"),
            ("unrepairable_memory", "No"),
        ]),
        # As on the H200: a GPU with a row remapper reports no page retirement, unless one is planted.
        ("retired_pages", [
            ("multiple_single_bit_retirement", [("retired_count", "N/A"), ("retired_pagelist", "N/A")]),
            ("double_bit_retirement", [("retired_count", 1 if retired_pending else "N/A"),
                                       ("retired_pagelist", "N/A")]),
            ("pending_blacklist", "N/A"),
            ("pending_retirement", "Yes" if retired_pending else "N/A"),
        ]),
        ("remapped_rows", [
            ("remapped_row_corr", 1 if remap == "pending" else 0),
            ("remapped_row_corr_inactive", 0),
            ("remapped_row_unc", 0),
            ("remapped_row_unc_inactive", 0),
            ("remapped_row_pending", _yes(remap == "pending")),
            ("remapped_row_failure", _yes(remap == "failed")),
        ]),
        ("temperature", [("gpu_temp", "%s C" % row["temperature.gpu"]), ("gpu_temp_tlimit", "N/A"),
                         ("memory_temp", "N/A")]),
        ("gpu_power_readings", [
            ("power_state", row["pstate"]),
            ("average_power_draw", "%s W" % row["power.draw"][0]),
            ("instant_power_draw", "%s W" % row["power.draw"][0]),
            ("current_power_limit", "%.2f W" % power_limit_w),
            ("requested_power_limit", "%.2f W" % power_limit_w),
            ("default_power_limit", "%.2f W" % power_limit_w),
            ("min_power_limit", "150.00 W"),
            ("max_power_limit", "%.2f W" % power_limit_w),
        ]),
        ("processes", []),
        ("accounted_processes", []),
    ]


def report(rows, attached, timestamp, driver, cuda, memory_total_mib, power_limit_w):
    """The whole ``nvidia-smi -q -x`` text for ``rows`` (the GPUs asked for, in index order).

    ``attached`` is every GPU the driver lists: the real tool counts them all in
    <attached_gpus> also when -i asks for one.
    """
    planted = faults()
    out = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "%s">' % DTD, "<nvidia_smi_log>"]
    for tag, value in (("timestamp", timestamp), ("driver_version", driver), ("cuda_version", cuda),
                       ("attached_gpus", attached)):
        _render(tag, value, 1, out)
    for row in rows:
        _render("gpu", gpu_elements(row, planted.get(row["slot"], {}), memory_total_mib, power_limit_w), 1, out,
                attributes=' id="%s"' % row["pci.bus_id"])
    out += ["", "</nvidia_smi_log>"]
    return "\n".join(out) + "\n"
