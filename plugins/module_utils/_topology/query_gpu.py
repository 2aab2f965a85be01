# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parser of `nvidia-smi --query-gpu=... --format=csv`: identity, compute capability, memory, power.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    QUERY_GPU_FIELDS,
    TopologyError,
    EXPECTED,
    clean_lines,
    int_or_none,
    normalize_bus_id,
)


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
    lines = [line.strip() for line in clean_lines(text, what) if line.strip()]
    warnings = []
    # A pasted shell prompt with the command in it comes before the output.
    while lines and "nvidia-smi" in lines[0]:
        warnings.append("query-gpu: ignored the line before the output: %r" % lines[0])
        lines.pop(0)
    if not lines:
        raise TopologyError("%s has no lines after the command: expected the output of %s" % (what, EXPECTED[what]))
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
        index = int_or_none(values.get("index"))
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
            "memory_mib": int_or_none(memory),
            "power_limit_w": power_limit,
        })
    indexes = [gpu["index"] for gpu in gpus]
    if len(set(indexes)) != len(indexes):
        raise TopologyError("query-gpu output lists GPU index %s twice"
                            % [index for index in indexes if indexes.count(index) > 1][0])
    return {"gpus": sorted(gpus, key=lambda gpu: gpu["index"]), "warnings": warnings}
