# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every topology parser shares: the error, input cleaning, the header finder and the
link classes of `nvidia-smi topo -m` with their order and meaning.

Real outputs vary between driver generations and between the ways people paste them, so the
parsers tolerate layout noise (tabs or spaces, indentation, ANSI codes - also when a web page
kept `[4m` but lost its ESC byte -, prompts glued to the header, cut legends) and report it as
warnings, but they never guess a cell: a row whose cells cannot be read is an error that names
the row.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re


class TopologyError(Exception):
    """Input that cannot be read as what it claims to be."""


# Link classes as `nvidia-smi topo -m` prints them, weakest first. SOC is the
# name drivers before 2017 printed for SYS.
_PCIE_RANK = {"SYS": 0, "SOC": 0, "NODE": 1, "PHB": 2, "PXB": 3, "PIX": 4}
NVLINK = re.compile(r"^NV(\d+)$")
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


# Colour and underline codes; a header pasted from a web page may keep `[4m`...`[0m` without the
# ESC byte, which would otherwise glue itself to GPU0.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[[0-9;]*m")


_HEADER_GPU0 = re.compile(r"(?:^|\s)GPU0(?=\s|$)")


def clean_lines(text, what):
    if text is None or not text.strip():
        raise TopologyError("%s is empty: expected the output of %s" % (what, EXPECTED[what]))
    text = _ANSI.sub("", text).replace("\r", "")
    return text.split("\n")


EXPECTED = {
    "topology matrix": "`nvidia-smi topo -m` (a header line with GPU0, GPU1, ... and one row per GPU)",
    "P2P matrix": "`nvidia-smi topo -p2p r` or `-p2p w` (a header line with GPU0, GPU1, ... and one row per GPU)",
    "query-gpu output": "`nvidia-smi --query-gpu=%s --format=csv`" % ",".join(QUERY_GPU_FIELDS),
    "NCCL topology XML": "the file NCCL writes with NCCL_TOPO_DUMP_FILE (<system><cpu><pci><gpu .../>)",
}


def is_link_class(cell):
    return cell in _PCIE_RANK or bool(NVLINK.match(cell))


def link_rank(cell):
    """Order link classes from weakest (SYS) to strongest (NV<n>, more links stronger)."""
    match = NVLINK.match(cell)
    if match:
        return 10 + int(match.group(1))
    return _PCIE_RANK[cell]


def find_header(lines, what):
    for number, line in enumerate(lines):
        match = _HEADER_GPU0.search(line)
        if match:
            start = match.start() if line[match.start()] not in " \t" else match.start() + 1
            return number, line[:start], line[start:]
    raise TopologyError("no header line with GPU0 in the %s: expected the output of %s" % (what, EXPECTED[what]))


def read_matrix(text, what):
    """The cleaned lines of a GPU matrix, where its header is, the header, and a warning for text before it."""
    lines = clean_lines(text, what)
    header_at, before, header = find_header(lines, what)
    warnings = []
    if before.strip():
        warnings.append("%s: ignored text before the header: %r" % (what, before.strip()))
    return lines, header_at, header, warnings


def int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def normalize_bus_id(bus_id):
    """`00000000:01:00.0` (nvidia-smi) and `0000:01:00.0` (sysfs, NCCL) -> `0000:01:00.0`."""
    if bus_id is None:
        return None
    text = bus_id.strip().lower()
    match = re.match(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", text)
    if not match:
        return text
    return "%04x:%s:%s.%s" % (int(match.group(1), 16), match.group(2), match.group(3), match.group(4))


def bridge_link_class(path_a, path_b):
    """PHB, PXB or PIX for two devices under one host bridge, from their bridge paths (top first).

    PIX when both hang off one bridge or one switch (two downstream ports of one switch count as
    the single bridge of PIX: nvidia-smi prints PIX for a GPU and a NIC on different ports of one
    switch), PXB when they share a bridge further up, PHB when they share only the host bridge.
    """
    shared = 0
    for bridge_a, bridge_b in zip(path_a, path_b):
        if bridge_a != bridge_b:
            break
        shared += 1
    if shared == 0:
        return "PHB"
    if len(path_a) - shared <= 1 and len(path_b) - shared <= 1:
        return "PIX"
    return "PXB"
