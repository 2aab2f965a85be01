# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse GPU topology outputs and derive NCCL / SGLang advice from them.

Pure functions: text in, plain data out. Inputs are the outputs of
`nvidia-smi topo -m`, `nvidia-smi topo -p2p r|w`, `nvidia-smi --query-gpu=... --format=csv`,
an NCCL topology XML (NCCL_TOPO_DUMP_FILE) and the GPU list read from sysfs
(module_utils._pci_sysfs). Real outputs vary between driver generations and
between the ways people paste them, so the parsers tolerate layout noise
(tabs or spaces, indentation, ANSI codes, prompts glued to the header, cut
legends) and report it as warnings, but they never guess a cell: a row whose
cells cannot be read is an error that names the row.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re
import xml.etree.ElementTree as ET

try:
    from xml.etree.ElementTree import XMLPullParser
except ImportError:  # pragma: no cover - Python 2 has no pull parser
    XMLPullParser = None


class TopologyError(Exception):
    """Input that cannot be read as what it claims to be."""


# Link classes as `nvidia-smi topo -m` prints them, weakest first. SOC is the
# name drivers before 2017 printed for SYS.
_PCIE_RANK = {"SYS": 0, "SOC": 0, "NODE": 1, "PHB": 2, "PXB": 3, "PIX": 4}
_NVLINK = re.compile(r"^NV(\d+)$")
LINK_MEANING = {
    "SYS": "crosses the SMP interconnect between NUMA nodes, such as QPI, UPI or xGMI",
    "SOC": "crosses the SMP interconnect between CPU sockets",
    "NODE": "crosses the interconnect between PCIe host bridges within a NUMA node",
    "PHB": "crosses a PCIe host bridge, typically the CPU",
    "PXB": "crosses several PCIe bridges without the host bridge",
    "PIX": "crosses at most one PCIe bridge",
}
P2P_STATUS = {
    "X": "self",
    "OK": "status OK",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}

# Fields the module asks `nvidia-smi --query-gpu` for, in this order; a saved
# query-gpu file without a header line must use the same order.
QUERY_GPU_FIELDS = ("index", "name", "pci.bus_id", "compute_cap", "memory.total", "power.limit")
_FIELD_ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "compute_capability": "compute_cap",
    "enforced.power.limit": "power.limit",
}
_KNOWN_FIELDS = frozenset(QUERY_GPU_FIELDS) | frozenset(_FIELD_ALIASES) | frozenset((
    "uuid", "serial", "driver_version", "memory.used", "memory.free", "power.draw", "utilization.gpu",
    "temperature.gpu", "persistence_mode", "compute_mode", "pstate", "count", "power.default_limit",
    "power.max_limit", "clocks.max.sm", "pci.device_id", "vbios_version",
))
_MISSING_VALUES = frozenset(("", "n/a", "[n/a]", "[not supported]", "[unknown error]", "[insufficient permissions]"))

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_NIC_LABEL = re.compile(r"^NIC(\d+)$")
_HEADER_GPU0 = re.compile(r"(?:^|\s)GPU0(?=\s|$)")
_NIC_LEGEND_ROW = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_P2P_CELL = re.compile(r"^[A-Z]{1,4}$")
# RDMA device names that NCCL's IB/RoCE transport can drive (kernel ib_device
# names: Mellanox/NVIDIA mlx4/mlx5, Broadcom bnxt_re, Intel irdma, AWS EFA, ...).
_RDMA_NAME = re.compile(r"^(mlx\d+_\d+|ib\w*|bnxt_re\d+|irdma\d+|efa\d+|qedr\d+|hfi1_\d+|erdma_\d+|ionic_\d+|rxe\d+)$")
_HEADER_COLUMNS = (
    ("GPU NUMA ID", "gpu_numa_id"),
    ("CPU Affinity", "cpu_affinity"),
    ("NUMA Affinity", "numa_affinity"),
)


def _clean_lines(text, what):
    if text is None or not text.strip():
        raise TopologyError("%s is empty: expected the output of %s" % (what, _EXPECTED[what]))
    text = _ANSI.sub("", text).replace("\r", "")
    return text.split("\n")


_EXPECTED = {
    "topology matrix": "`nvidia-smi topo -m` (a header line with GPU0, GPU1, ... and one row per GPU)",
    "P2P matrix": "`nvidia-smi topo -p2p r` or `-p2p w` (a header line with GPU0, GPU1, ... and one row per GPU)",
    "query-gpu output": "`nvidia-smi --query-gpu=%s --format=csv`" % ",".join(QUERY_GPU_FIELDS),
    "NCCL topology XML": "the file NCCL writes with NCCL_TOPO_DUMP_FILE (<system><cpu><pci><gpu .../>)",
}


def is_link_class(cell):
    return cell in _PCIE_RANK or bool(_NVLINK.match(cell))


def link_rank(cell):
    """Order link classes from weakest (SYS) to strongest (NV<n>, more links stronger)."""
    match = _NVLINK.match(cell)
    if match:
        return 10 + int(match.group(1))
    return _PCIE_RANK[cell]


def _find_header(lines, what):
    for number, line in enumerate(lines):
        match = _HEADER_GPU0.search(line)
        if match:
            start = match.start() if line[match.start()] not in " \t" else match.start() + 1
            return number, line[:start], line[start:]
    raise TopologyError("no header line with GPU0 in the %s: expected the output of %s" % (what, _EXPECTED[what]))


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _split_header(header):
    """Device labels and affinity columns of a `topo -m` header, in order."""
    for label, key in _HEADER_COLUMNS:
        header = header.replace(label, "\x00%s\x00" % key)
    column_keys = set(key for _label, key in _HEADER_COLUMNS)
    tokens = []
    for part in header.split("\x00"):
        if part in column_keys:
            tokens.append(("column", part))
        else:
            tokens.extend(("word", word) for word in part.split())
    return tokens


def parse_topo_matrix(text):
    """Parse `nvidia-smi topo -m` (or `-mp`) output.

    Returns a dict with gpu_links (N x N), gpu_rows (per GPU: cpu_affinity,
    numa_node), nic_names (matrix order, NIC<n> resolved through the NIC
    legend) and warnings.
    """
    what = "topology matrix"
    lines = _clean_lines(text, what)
    warnings = []
    header_at, before, header = _find_header(lines, what)
    if before.strip():
        warnings.append("topology matrix: ignored text before the header: %r" % before.strip())

    devices = []
    columns = []
    for kind, value in _split_header(header):
        if kind == "column":
            columns.append(value)
        elif columns:
            # A column this parser does not know, after the affinity columns:
            # values cannot be placed under it safely.
            columns.append("unknown:" + value)
            warnings.append("topology matrix: unknown header column %r ignored" % value)
        else:
            devices.append(value)
    gpu_labels = [label for label in devices if _GPU_LABEL.match(label)]
    expected = ["GPU%d" % index for index in range(len(gpu_labels))]
    if devices[:len(gpu_labels)] != expected:
        raise TopologyError("topology matrix header lists GPUs as %s: expected GPU0, GPU1, ... first and in order"
                            % ", ".join(devices))
    nic_labels = devices[len(gpu_labels):]
    device_count = len(devices)

    rows = {}
    nic_legend = {}
    in_nic_legend = False
    rows_ended = False
    for number in range(header_at + 1, len(lines)):
        line = lines[number]
        stripped = line.strip()
        if not stripped:
            # The matrix ends at its first blank line: what follows is legend, or
            # another command's output when several were saved into one file.
            rows_ended = rows_ended or bool(rows)
            continue
        if stripped.startswith("NIC Legend"):
            in_nic_legend = True
            continue
        legend_match = _NIC_LEGEND_ROW.match(line)
        if legend_match:
            nic_legend[legend_match.group(1)] = legend_match.group(2)
            continue
        if rows_ended:
            continue
        tokens = stripped.split()
        label = tokens[0]
        if label not in devices:
            if _GPU_LABEL.match(label) and not in_nic_legend:
                raise TopologyError("topology matrix row %r: %s is not in the header (%s)"
                                    % (stripped, label, " ".join(devices)))
            continue
        if label in rows:
            raise TopologyError("topology matrix row %r: a second row for %s" % (stripped, label))
        cells = tokens[1:1 + device_count]
        extra = tokens[1 + device_count:]
        problem = None
        if len(cells) < device_count:
            problem = "%d link cells where the header has %d devices" % (len(cells), device_count)
        else:
            own = devices.index(label)
            for position, cell in enumerate(cells):
                if position == own:
                    if cell != "X":
                        problem = "cell %d (%s to itself) is %r, expected X" % (position, label, cell)
                        break
                elif not is_link_class(cell):
                    problem = "cell %d (%s to %s) is %r, not a link class (SYS, NODE, PHB, PXB, PIX, NV<n>)" % (
                        position, label, devices[position], cell)
                    break
        if problem:
            if _GPU_LABEL.match(label):
                raise TopologyError("topology matrix row %r: %s" % (stripped, problem))
            warnings.append("topology matrix: row %s ignored: %s" % (label, problem))
            continue
        rows[label] = {"cells": cells, "extra": extra, "line": stripped}

    missing = [label for label in gpu_labels if label not in rows]
    if missing:
        raise TopologyError("topology matrix has no row for %s (the header lists %d GPUs): the output is cut"
                            % (", ".join(missing), len(gpu_labels)))

    count = len(gpu_labels)
    gpu_links = [rows[label]["cells"][:count] for label in gpu_labels]
    for i in range(count):
        for j in range(i + 1, count):
            if gpu_links[i][j] != gpu_links[j][i]:
                warnings.append("topology matrix is not symmetric: GPU%d-GPU%d is %s one way and %s the other"
                                % (i, j, gpu_links[i][j], gpu_links[j][i]))

    gpu_rows = []
    for label in gpu_labels:
        extra = rows[label]["extra"]
        info = {"cpu_affinity": None, "numa_node": None}
        if len(extra) != len(columns):
            if columns:
                warnings.append("topology matrix: %s has %d affinity values for %d columns; its CPU/NUMA affinity "
                                "is left unknown" % (label, len(extra), len(columns)))
        else:
            values = dict(zip(columns, extra))
            cpu = values.get("cpu_affinity")
            info["cpu_affinity"] = None if cpu in (None, "N/A") else cpu
            numa = values.get("numa_affinity")
            if numa not in (None, "N/A"):
                info["numa_node"] = _int_or_none(numa)
                if info["numa_node"] is None:
                    warnings.append("topology matrix: %s has NUMA affinity %r, not one node; left unknown"
                                    % (label, numa))
        gpu_rows.append(info)

    nic_names = []
    for label in nic_labels:
        if _NIC_LABEL.match(label):
            if label in nic_legend:
                nic_names.append(nic_legend[label])
            else:
                nic_names.append(label)
                warnings.append("topology matrix: no NIC legend entry for %s; name kept as %s" % (label, label))
        else:
            nic_names.append(label)
    missing_nic_rows = [label for label in nic_labels if label not in rows]
    if missing_nic_rows:
        warnings.append("topology matrix: no row for %s" % ", ".join(missing_nic_rows))
    return {"gpu_links": gpu_links, "gpu_rows": gpu_rows, "nic_names": nic_names, "warnings": warnings}


def parse_p2p_matrix(text):
    """Parse `nvidia-smi topo -p2p r|w|n|a|p`: N x N statuses (X on the diagonal)."""
    what = "P2P matrix"
    lines = _clean_lines(text, what)
    warnings = []
    header_at, before, header = _find_header(lines, what)
    if before.strip():
        warnings.append("P2P matrix: ignored text before the header: %r" % before.strip())
    labels = header.split()
    expected = ["GPU%d" % index for index in range(len(labels))]
    if labels != expected:
        raise TopologyError("P2P matrix header is %r: expected GPU0, GPU1, ... in order" % header.strip())
    count = len(labels)
    rows = {}
    for number in range(header_at + 1, len(lines)):
        tokens = lines[number].split()
        if not tokens and rows:
            break
        if not tokens or not _GPU_LABEL.match(tokens[0]):
            continue
        label = tokens[0]
        stripped = lines[number].strip()
        if label not in labels:
            raise TopologyError("P2P matrix row %r: %s is not in the header" % (stripped, label))
        if label in rows:
            raise TopologyError("P2P matrix row %r: a second row for %s" % (stripped, label))
        cells = tokens[1:]
        if len(cells) != count:
            raise TopologyError("P2P matrix row %r: %d cells where the header has %d GPUs"
                                % (stripped, len(cells), count))
        own = labels.index(label)
        for position, cell in enumerate(cells):
            if position == own and cell != "X":
                raise TopologyError("P2P matrix row %r: %s to itself is %r, expected X" % (stripped, label, cell))
            if not _P2P_CELL.match(cell):
                raise TopologyError("P2P matrix row %r: cell %r is not a P2P status (OK, NS, CNS, GNS, TNS, ...)"
                                    % (stripped, cell))
            if cell not in P2P_STATUS:
                warnings.append("P2P matrix: unknown status %r (GPU%d to GPU%d) counted as not OK"
                                % (cell, own, position))
        rows[label] = cells
    missing = [label for label in labels if label not in rows]
    if missing:
        raise TopologyError("P2P matrix has no row for %s: the output is cut" % ", ".join(missing))
    return {"matrix": [rows[label] for label in labels], "warnings": warnings}


def _field_name(cell):
    name = re.sub(r"\s*\[[^\]]*\]\s*$", "", cell.strip()).strip().lower()
    return _FIELD_ALIASES.get(name, name)


def _value(cell):
    text = cell.strip()
    if text.lower() in _MISSING_VALUES:
        return None
    return re.sub(r"\s*(MiB|W|%|MHz|C)$", "", text)


def _compute_capability(raw, warnings, label):
    if raw is None:
        return None, None
    match = re.match(r"^(\d+)\.(\d+)$", raw)
    if not match:
        warnings.append("query-gpu: %s has compute capability %r, not like 12.0; left unknown" % (label, raw))
        return None, None
    major, minor = int(match.group(1)), int(match.group(2))
    return "%d.%d" % (major, minor), major * 10 + minor


def parse_query_gpu(text):
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

    A header line (any field order, with or without units) names the columns;
    without one the columns must be QUERY_GPU_FIELDS in order.
    """
    what = "query-gpu output"
    lines = [line.strip() for line in _clean_lines(text, what) if line.strip()]
    warnings = []
    # A pasted shell prompt with the command in it comes before the output.
    while lines and "nvidia-smi" in lines[0]:
        warnings.append("query-gpu: ignored the line before the output: %r" % lines[0])
        lines.pop(0)
    if not lines:
        raise TopologyError("%s has no lines after the command: expected the output of %s" % (what, _EXPECTED[what]))
    first = [cell.strip() for cell in lines[0].split(",")]
    first_names = [_field_name(cell) for cell in first]
    has_header = any(name in _KNOWN_FIELDS for name in first_names) and all(
        re.match(r"^[a-z_.\-]+$", name) for name in first_names)
    if has_header:
        fields = first_names
        body = lines[1:]
        unknown = [name for name in fields if name not in _KNOWN_FIELDS]
        if unknown:
            warnings.append("query-gpu: unknown columns ignored: %s" % ", ".join(unknown))
    else:
        fields = list(QUERY_GPU_FIELDS)
        body = lines
    if not body:
        raise TopologyError("query-gpu output has a header but no GPU lines")
    gpus = []
    for position, line in enumerate(body):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(fields):
            hint = "" if has_header else "; a file without a header line must list " + ",".join(QUERY_GPU_FIELDS)
            raise TopologyError("query-gpu line %r has %d values for %d columns (%s)%s"
                                % (line, len(cells), len(fields), ", ".join(fields), hint))
        values = dict(zip(fields, (_value(cell) for cell in cells)))
        index = _int_or_none(values.get("index"))
        if "index" in values and index is None:
            raise TopologyError("query-gpu line %r: index %r is not a number" % (line, values.get("index")))
        label = "GPU%s" % (index if index is not None else position)
        capability, sm = _compute_capability(values.get("compute_cap"), warnings, label)
        memory = values.get("memory.total")
        power = values.get("power.limit")
        try:
            power_limit = float(power) if power is not None else None
        except ValueError:
            warnings.append("query-gpu: %s power limit %r is not a number; left unknown" % (label, power))
            power_limit = None
        gpus.append({
            "index": index if index is not None else position,
            "name": values.get("name"),
            "pci_bus_id": normalize_bus_id(values.get("pci.bus_id")),
            "compute_capability": capability,
            "sm": sm,
            "memory_mib": _int_or_none(memory),
            "power_limit_w": power_limit,
        })
    indexes = [gpu["index"] for gpu in gpus]
    if len(set(indexes)) != len(indexes):
        raise TopologyError("query-gpu output lists GPU index %s twice"
                            % [index for index in indexes if indexes.count(index) > 1][0])
    return {"gpus": sorted(gpus, key=lambda gpu: gpu["index"]), "warnings": warnings}


def normalize_bus_id(bus_id):
    """`00000000:01:00.0` (nvidia-smi) and `0000:01:00.0` (sysfs, NCCL) -> `0000:01:00.0`."""
    if bus_id is None:
        return None
    text = bus_id.strip().lower()
    match = re.match(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", text)
    if not match:
        return text
    return "%04x:%s:%s.%s" % (int(match.group(1), 16), match.group(2), match.group(3), match.group(4))


def cpumask_to_list(mask):
    """NCCL/sysfs hex CPU mask (`0000,000fffff,ff000000,0fffffff`) -> cpulist (`0-27,56-83`)."""
    if not mask:
        return None
    try:
        value = int(mask.replace(",", ""), 16)
    except ValueError:
        return None
    cpus = [bit for bit in range(value.bit_length()) if value >> bit & 1]
    ranges = []
    for cpu in cpus:
        if ranges and ranges[-1][1] == cpu - 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join("%d" % low if low == high else "%d-%d" % (low, high) for low, high in ranges) or None


def _xml_events(text, warnings):
    """Start/end events of the XML; a truncated or trailing-garbage file yields what came before."""
    events = []
    if XMLPullParser is None:  # pragma: no cover
        root = ET.fromstring(text)
        for element in root.iter():
            events.append(("start", element))
        return events
    parser = XMLPullParser(events=("start", "end"))
    error = None
    # The pull parser queues a syntax error among the events and raises it
    # from read_events(), after the events that came before it.
    for step in (lambda: parser.feed(text), parser.close):
        try:
            step()
            events.extend(parser.read_events())
        except (ET.ParseError, ValueError) as exc:
            error = exc
            break
    if error is not None:
        closed_system = any(kind == "end" and element.tag == "system" for kind, element in events)
        if closed_system:
            warnings.append("NCCL topology XML: ignored text after </system> (%s)" % error)
        elif events:
            warnings.append("NCCL topology XML is cut or damaged (%s); read what came before" % error)
        else:
            raise TopologyError("NCCL topology XML cannot be read (%s): expected %s"
                                % (error, _EXPECTED["NCCL topology XML"]))
    return events


def parse_nccl_xml(text):
    """Read GPUs, NICs and links from an NCCL topology dump.

    Links follow NCCL's own path classes: NV<n> for <nvlink> elements, PIX/PXB
    when the GPUs share PCI bridges, PHB when they share only the CPU element,
    SYS across CPU elements (NUMA nodes).
    """
    what = "NCCL topology XML"
    if text is None or not text.strip():
        raise TopologyError("%s is empty: expected %s" % (what, _EXPECTED[what]))
    warnings = []
    events = _xml_events(text.strip(), warnings)
    if not events or events[0][1].tag != "system":
        raise TopologyError("NCCL topology XML does not start with <system>: expected %s" % _EXPECTED[what])
    gpus = []
    nics = []
    nvlinks = []
    stack = []
    cpu_index = -1
    cpu_info = {}
    for kind, element in events:
        if kind == "end":
            if stack:
                stack.pop()
            continue
        attrs = element.attrib
        tag = element.tag
        if tag == "cpu":
            cpu_index += 1
            numa = _int_or_none(attrs.get("numaid"))
            cpu_info = {"index": cpu_index, "numa_node": numa if numa is not None and numa >= 0 else None,
                        "cpu_affinity": cpumask_to_list(attrs.get("affinity"))}
        elif tag == "gpu":
            pci_path = [attrs_of.get("busid") for tag_of, attrs_of in stack if tag_of == "pci"]
            dev = _int_or_none(attrs.get("dev"))
            sm = _int_or_none(attrs.get("sm"))
            gpus.append({
                "index": dev,
                "sm": sm,
                "compute_capability": "%d.%d" % (sm // 10, sm % 10) if sm else None,
                "pci_bus_id": normalize_bus_id(pci_path[-1]) if pci_path else None,
                "numa_node": cpu_info.get("numa_node"),
                "cpu_affinity": cpu_info.get("cpu_affinity"),
                "cpu": cpu_info.get("index"),
                "bridges": [normalize_bus_id(bus) for bus in pci_path[:-1]],
                "gpu_bus": normalize_bus_id(pci_path[-1]) if pci_path else None,
            })
        elif tag == "net":
            nics.append(attrs.get("name"))
        elif tag == "nvlink":
            owner = [attrs_of.get("busid") for tag_of, attrs_of in stack if tag_of == "pci"]
            nvlinks.append((normalize_bus_id(owner[-1]) if owner else None,
                            normalize_bus_id(attrs.get("target")), attrs.get("tclass"),
                            _int_or_none(attrs.get("count")) or 1))
        stack.append((tag, dict(attrs)))
    if not gpus:
        raise TopologyError("NCCL topology XML has no <gpu> element: expected %s" % _EXPECTED[what])
    if any(gpu["index"] is None for gpu in gpus):
        for position, gpu in enumerate(gpus):
            gpu["index"] = position
        warnings.append("NCCL topology XML: a <gpu> without dev; GPUs numbered in file order")
    gpus.sort(key=lambda gpu: gpu["index"])
    links = _xml_links(gpus, nvlinks)
    for gpu in gpus:
        for key in ("cpu", "bridges", "gpu_bus"):
            gpu.pop(key)
    return {"gpus": gpus, "gpu_links": links, "nic_names": [name for name in nics if name], "warnings": warnings}


def _xml_links(gpus, nvlinks):
    by_bus = dict((gpu["gpu_bus"], gpu["index"]) for gpu in gpus)
    nv_count = {}
    switch_links = {}
    for owner, target, tclass, count in nvlinks:
        if owner not in by_bus:
            continue
        if target in by_bus:
            key = tuple(sorted((by_bus[owner], by_bus[target])))
            nv_count[key] = max(nv_count.get(key, 0), count)
        elif tclass == "0x068000":
            # NVSwitch: every GPU linked to the switches reaches every other one.
            switch_links[by_bus[owner]] = switch_links.get(by_bus[owner], 0) + count
    count = len(gpus)
    links = [["X"] * count for _row in range(count)]
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            first, second = gpus[a], gpus[b]
            key = tuple(sorted((first["index"], second["index"])))
            if key in nv_count:
                links[a][b] = "NV%d" % nv_count[key]
            elif first["index"] in switch_links and second["index"] in switch_links:
                links[a][b] = "NV%d" % min(switch_links[first["index"]], switch_links[second["index"]])
            elif first["cpu"] != second["cpu"]:
                links[a][b] = "SYS"
            else:
                shared = 0
                for bridge_a, bridge_b in zip(first["bridges"], second["bridges"]):
                    if bridge_a != bridge_b:
                        break
                    shared += 1
                if shared == 0:
                    links[a][b] = "PHB"
                elif len(first["bridges"]) - shared <= 1 and len(second["bridges"]) - shared <= 1:
                    links[a][b] = "PIX"
                else:
                    links[a][b] = "PXB"
    return links


def sysfs_links(sysfs_gpus, link_class):
    """N x N link estimate from the PCI tree (pci_sysfs.link_class)."""
    count = len(sysfs_gpus)
    return [["X" if a == b else link_class(sysfs_gpus[a], sysfs_gpus[b]) for b in range(count)]
            for a in range(count)]


def _pairs(count):
    return [(a, b) for a in range(count) for b in range(a + 1, count)]


def _version_tuple(version):
    parts = re.findall(r"\d+", version or "")
    return tuple(int(part) for part in parts[:3])


def build_facts(topo=None, p2p_read=None, p2p_write=None, query=None, xml=None, sysfs_gpus=None,
                sysfs_links_matrix=None, rdma_devices=None, sources=None, tp_size=None,
                flashinfer_version=None, warnings=None):
    """Merge parsed inputs into the nccl_topology facts and add the advice.

    Precedence where inputs overlap: query-gpu for identity (names, bus ids,
    compute capability), the topology matrix for links and affinity, then the
    NCCL XML, then sysfs. Disagreements become warnings, never silent picks.
    """
    warnings = list(warnings or [])
    for parsed in (topo, p2p_read, p2p_write, query, xml):
        if parsed:
            warnings.extend(parsed.get("warnings", []))

    counts = {}
    if query:
        counts["query-gpu"] = len(query["gpus"])
    if topo:
        counts["topology matrix"] = len(topo["gpu_links"])
    if xml:
        counts["NCCL XML"] = len(xml["gpus"])
    if sysfs_gpus is not None and (sysfs_gpus or not counts):
        counts["sysfs"] = len(sysfs_gpus)
    for name, parsed in (("P2P read matrix", p2p_read), ("P2P write matrix", p2p_write)):
        if parsed:
            counts[name] = len(parsed["matrix"])
    primary = next((name for name in ("query-gpu", "topology matrix", "NCCL XML", "sysfs") if name in counts), None)
    gpu_count = counts.get(primary, 0)
    disagree = dict((name, value) for name, value in counts.items() if value != gpu_count)
    if disagree:
        warnings.append("GPU counts disagree: %s" % ", ".join("%s %d" % item for item in sorted(counts.items())))

    gpus = []
    for index in range(gpu_count):
        gpus.append({"index": index, "name": None, "pci_bus_id": None, "compute_capability": None, "sm": None,
                     "memory_mib": None, "power_limit_w": None, "numa_node": None, "cpu_affinity": None})

    def fill(entry, key, value, source):
        if value is None:
            return
        if entry[key] is None:
            entry[key] = value
        elif entry[key] != value:
            warnings.append("GPU%d %s: %s says %r, kept %r" % (entry["index"], key, source, value, entry[key]))

    if query:
        for position, item in enumerate(query["gpus"][:gpu_count]):
            for key in ("name", "pci_bus_id", "compute_capability", "sm", "memory_mib", "power_limit_w"):
                fill(gpus[position], key, item.get(key), "query-gpu")
    if topo and len(topo["gpu_rows"]) == gpu_count:
        for entry, row in zip(gpus, topo["gpu_rows"]):
            fill(entry, "cpu_affinity", row["cpu_affinity"], "topology matrix")
            fill(entry, "numa_node", row["numa_node"], "topology matrix")
    by_bus = dict((entry["pci_bus_id"], entry) for entry in gpus if entry["pci_bus_id"])
    for source, items in (("sysfs", sysfs_gpus or []), ("NCCL XML", (xml or {}).get("gpus", []))):
        for position, item in enumerate(items):
            bus = item.get("pci_bus_id") or item.get("bdf")
            entry = by_bus.get(bus)
            if entry is None and not by_bus and position < gpu_count and len(items) == gpu_count:
                # No bus ids to match on (no query-gpu): nvidia-smi, NCCL and
                # sysfs all number GPUs in PCI bus order.
                entry = gpus[position]
                fill(entry, "pci_bus_id", bus, source)
            if entry is None:
                if by_bus:
                    warnings.append("%s lists a GPU at %s that nvidia-smi does not show (driver not bound to it?)"
                                    % (source, bus))
                continue
            fill(entry, "numa_node", item.get("numa_node"), source)
            fill(entry, "cpu_affinity", item.get("cpu_affinity"), source)
            if source == "NCCL XML":
                fill(entry, "sm", item.get("sm"), source)
                fill(entry, "compute_capability", item.get("compute_capability"), source)

    links = None
    links_from = None
    for name, candidate in (("topology matrix", topo and topo["gpu_links"]),
                            ("NCCL XML", xml and xml["gpu_links"]),
                            ("sysfs", sysfs_links_matrix)):
        if candidate is not None and candidate is not False:
            if len(candidate) == gpu_count:
                links, links_from = candidate, name
                break
            warnings.append("%s links cover %d GPUs, not %d; not used" % (name, len(candidate), gpu_count))
    if links is None:
        links = [["X" if a == b else "UNKNOWN" for b in range(gpu_count)] for a in range(gpu_count)]
        if gpu_count > 1:
            warnings.append("no input gave the links between GPUs; read `nvidia-smi topo -m` or the PCI tree")

    nic_names = None
    if topo:
        nic_names = list(topo["nic_names"])
    elif xml:
        nic_names = list(xml["nic_names"])
    elif rdma_devices is not None:
        nic_names = list(rdma_devices)

    def p2p_matrix(parsed, label):
        if not parsed:
            return None
        if len(parsed["matrix"]) != gpu_count:
            warnings.append("%s covers %d GPUs, not %d; not used" % (label, len(parsed["matrix"]), gpu_count))
            return None
        return parsed["matrix"]

    p2p_r = p2p_matrix(p2p_read, "P2P read matrix")
    p2p_w = p2p_matrix(p2p_write, "P2P write matrix")

    pairs = _pairs(gpu_count)
    known_pairs = [(a, b) for a, b in pairs if links[a][b] != "UNKNOWN"]
    nvlink = any(_NVLINK.match(links[a][b]) for a, b in pairs)
    weakest = None
    if known_pairs and len(known_pairs) == len(pairs):
        weakest = min((links[a][b] for a, b in pairs), key=link_rank)

    all_pairs_p2p = None
    if gpu_count > 1:
        read_matrices = [matrix for matrix in (p2p_r, p2p_w) if matrix is not None]
        if read_matrices:
            all_pairs_p2p = all(matrix[a][b] == "OK" and matrix[b][a] == "OK"
                                for matrix in read_matrices for a, b in pairs)
        elif pairs and all(_NVLINK.match(links[a][b]) for a, b in pairs):
            all_pairs_p2p = True

    facts = {
        "gpu_count": gpu_count,
        "gpus": gpus,
        "gpu_links": links,
        "links_from": links_from,
        "nic_names": nic_names,
        "p2p_read": p2p_r,
        "p2p_write": p2p_w,
        "nvlink": nvlink,
        "weakest_link": weakest,
        "all_pairs_p2p": all_pairs_p2p,
        "sources": dict(sources or {}),
        "warnings": warnings,
    }
    facts.update(advise(facts, tp_size=tp_size, flashinfer_version=flashinfer_version))
    return facts


# FlashInfer's TRT-LLM allreduce kernels (gen_trtllm_comm_module) are built for
# these compute-capability majors: Hopper (9.x) and data-centre Blackwell (10.x).
FUSION_ARCH_MAJORS = (9, 10)
# SM12x (RTX PRO 6000, RTX 50xx) joined them officially in FlashInfer 0.6.17;
# before that only the collection's opt-in experimental patch builds them.
FUSION_SM12X_SINCE = (0, 6, 17)


def _pair_summary(matrix, pairs, good):
    bad = [(a, b, matrix[a][b]) for a, b in pairs if matrix[a][b] not in good or matrix[b][a] not in good]
    return bad


def advise(facts, tp_size=None, flashinfer_version=None):
    """Recommended NCCL environment, SGLang flags and the allreduce-fusion verdict, with reasons.

    Each rule only fires on evidence; where an input is missing the reason says
    so rather than assuming the better or the worse case.
    """
    env = {}
    args = {}
    reasons = []
    count = facts["gpu_count"]
    tp = tp_size if tp_size else count
    pairs = _pairs(count)
    links = facts["gpu_links"]
    p2p = facts["all_pairs_p2p"]
    weakest = facts["weakest_link"]

    if count == 0:
        return {"tp_size": tp, "recommended_env": env, "recommended_sglang_args": args,
                "allreduce_fusion_advised": False, "reasons": ["no GPU found: nothing to advise"]}
    if tp > count:
        reasons.append("tp_size %d is larger than the %d GPUs on this node; tensor parallelism across nodes "
                       "needs a network transport and is not judged here" % (tp, count))

    if weakest:
        reasons.append("%d GPUs; the weakest GPU-GPU link is %s (%s)"
                       % (count, weakest, LINK_MEANING.get(weakest, "NVLink")))

    # P2P evidence, as the driver reports it per pair.
    p2p_matrices = [(name, facts[key]) for name, key in (("read", "p2p_read"), ("write", "p2p_write"))
                    if facts[key] is not None]
    if count > 1 and p2p is False:
        for name, matrix in p2p_matrices:
            bad = _pair_summary(matrix, pairs, ("OK",))
            if bad:
                statuses = sorted(set(status for _a, _b, status in bad))
                reasons.append("P2P %s is not available on %d of %d GPU pairs (%s), e.g. GPU%d-GPU%d: every "
                               "transfer between those GPUs is staged through host memory"
                               % (name, len(bad), len(pairs),
                                  ", ".join("%s = %s" % (status, P2P_STATUS.get(status, "unknown status"))
                                            for status in statuses), bad[0][0], bad[0][1]))
    elif count > 1 and p2p is None:
        reasons.append("P2P status unknown: `nvidia-smi topo -p2p r` was not read and not every pair is NVLink")

    # NCCL_P2P_LEVEL: NCCL only uses P2P up to a path type (PXB by default on
    # Intel and ARM hosts). Where the driver reports P2P OK on every pair but
    # the path crosses the host bridge, raising the level to SYS lets NCCL use
    # it, as the known-good server for the target machine does (NCCL_P2P_LEVEL=5,
    # the legacy integer for SYS). Where P2P is missing no level changes
    # anything: NCCL asks CUDA (cudaDeviceCanAccessPeer) per pair and falls
    # back to shared memory by itself, so no P2P variable is recommended; a
    # blanket NCCL_P2P_DISABLE would also switch off pairs that do work.
    if count > 1 and p2p is True and weakest in ("PHB", "NODE", "SYS", "SOC"):
        env["NCCL_P2P_LEVEL"] = "SYS"
        reasons.append("NCCL_P2P_LEVEL=SYS: P2P is OK on every pair but the links cross %s; without it NCCL "
                       "stops using P2P past PXB on Intel and ARM hosts" % weakest)
    elif count > 1 and p2p is False:
        reasons.append("no NCCL P2P variable: NCCL checks P2P per pair and uses shared memory where it is "
                       "missing; NCCL_P2P_DISABLE would also turn off pairs that work")

    # NCCL_IB_DISABLE: without an RDMA device the IB transport has nothing to
    # drive; disabling it skips the verbs probe and keeps NCCL from picking a
    # stray RoCE/virtual device. Only recommended when the NIC list is known.
    nics = facts["nic_names"]
    if nics is not None:
        rdma = [name for name in nics if _RDMA_NAME.match(name or "")]
        if not rdma:
            env["NCCL_IB_DISABLE"] = "1"
            reasons.append("NCCL_IB_DISABLE=1: no InfiniBand/RoCE device (%s); GPUs on one node talk over "
                           "P2P or shared memory" % ("no NIC listed" if not nics else "NICs: " + ", ".join(nics)))
        else:
            reasons.append("RDMA NICs present (%s): NCCL's IB transport left enabled" % ", ".join(rdma))
    else:
        reasons.append("NIC list unknown (no topology matrix, NCCL XML or sysfs read): IB setting left alone")

    # SGLang's custom allreduce exchanges CUDA IPC buffers and needs P2P
    # between every pair; SGLang assumes P2P works unless --enable-p2p-check is
    # given, so at TP=2 on a machine without P2P it would try it anyway.
    if count > 1 and tp > 1 and p2p is False:
        args["disable-custom-all-reduce"] = True
        reasons.append("--disable-custom-all-reduce: SGLang's custom allreduce needs P2P (CUDA IPC) between all "
                       "GPUs and SGLang does not check for it by default; NCCL does the allreduce instead")

    fusion = True
    why_not = []
    if tp < 2:
        fusion = False
        why_not.append("tensor parallel size is %d: there is no allreduce to fuse" % tp)
    if p2p is not True:
        fusion = False
        if count > 1:
            why_not.append("FlashInfer's TRT-LLM allreduce fusion reads peer GPUs' memory directly and needs P2P "
                           "on every pair; %s" % ("P2P is missing here" if p2p is False else "P2P is unknown here"))
    sms = [gpu["sm"] for gpu in facts["gpus"]]
    if count and any(sm is None for sm in sms):
        fusion = False
        why_not.append("compute capability unknown: read `nvidia-smi --query-gpu=compute_cap`")
    elif count:
        majors = sorted(set(sm // 10 for sm in sms))
        sm12x_ok = _version_tuple(flashinfer_version) >= FUSION_SM12X_SINCE if flashinfer_version else False
        unsupported = [major for major in majors
                       if major not in FUSION_ARCH_MAJORS and not (major == 12 and sm12x_ok)]
        if unsupported:
            fusion = False
            arch = ", ".join("SM%d" % sm for sm in sorted(set(sms)))
            if unsupported == [12]:
                why_not.append("%s: FlashInfer's TRT-LLM allreduce kernels support SM90/SM100; SM12x only from "
                               "FlashInfer 0.6.17 (%s), or through the experimental patch, which cut throughput "
                               "by about 87%% on a PCIe-only SM120 VM"
                               % (arch, "installed %s" % flashinfer_version if flashinfer_version
                                  else "the pinned 0.6.3 is older"))
            else:
                why_not.append("%s: FlashInfer's TRT-LLM allreduce kernels support SM90 and SM100 only" % arch)
    if fusion:
        reasons.append("allreduce fusion advised: P2P on every pair, TP %d, supported architecture; measure it "
                       "against the unfused server before keeping it" % tp)
    else:
        reasons.append("allreduce fusion not advised: " + "; ".join(why_not))

    return {"tp_size": tp, "recommended_env": env, "recommended_sglang_args": args,
            "allreduce_fusion_advised": fusion, "reasons": reasons}
