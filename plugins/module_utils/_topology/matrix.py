# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parser of `nvidia-smi topo -m` (or `-mp`): GPU links, CPU and NUMA affinity, NICs.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    TopologyError,
    int_or_none,
    is_link_class,
    read_matrix,
)


GPU_LABEL = re.compile(r"^GPU(\d+)$")
_NIC_LABEL = re.compile(r"^NIC(\d+)$")


_NIC_LEGEND_ROW = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


# RDMA device names that NCCL's IB/RoCE transport can drive (kernel ib_device
# names: Mellanox/NVIDIA mlx4/mlx5, Broadcom bnxt_re, Intel irdma, AWS EFA, ...).
RDMA_NAME = re.compile(r"^(mlx\d+_\d+|ib\w*|bnxt_re\d+|irdma\d+|efa\d+|qedr\d+|hfi1_\d+|erdma_\d+|ionic_\d+|rxe\d+)$")
_HEADER_COLUMNS = (
    ("GPU NUMA ID", "gpu_numa_id"),
    ("CPU Affinity", "cpu_affinity"),
    ("NUMA Affinity", "numa_affinity"),
)


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
    lines, header_at, header, warnings = read_matrix(text, what)

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
    gpu_labels = [label for label in devices if GPU_LABEL.match(label)]
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
            if GPU_LABEL.match(label) and not in_nic_legend:
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
            if GPU_LABEL.match(label):
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
                info["numa_node"] = int_or_none(numa)
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
