# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parser of an NCCL topology dump (NCCL_TOPO_DUMP_FILE): GPUs, NICs, NVLinks and the PCI tree.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import xml.etree.ElementTree as ET

from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    TopologyError,
    bridge_link_class,
    EXPECTED,
    int_or_none,
    normalize_bus_id,
)


try:
    from xml.etree.ElementTree import XMLPullParser
except ImportError:  # pragma: no cover - Python 2 has no pull parser
    XMLPullParser = None


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
                                % (error, EXPECTED["NCCL topology XML"]))
    return events


def parse_nccl_xml(text):
    """Read GPUs, NICs and links from an NCCL topology dump.

    Links follow NCCL's own path classes: NV<n> for <nvlink> elements, PIX/PXB
    when the GPUs share PCI bridges, PHB when they share only the CPU element,
    SYS across CPU elements (NUMA nodes).
    """
    what = "NCCL topology XML"
    if text is None or not text.strip():
        raise TopologyError("%s is empty: expected %s" % (what, EXPECTED[what]))
    warnings = []
    events = _xml_events(text.strip(), warnings)
    if not events or events[0][1].tag != "system":
        raise TopologyError("NCCL topology XML does not start with <system>: expected %s" % EXPECTED[what])
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
            numa = int_or_none(attrs.get("numaid"))
            cpu_info = {"index": cpu_index, "numa_node": numa if numa is not None and numa >= 0 else None,
                        "cpu_affinity": cpumask_to_list(attrs.get("affinity"))}
        elif tag == "gpu":
            pci_path = [attrs_of.get("busid") for tag_of, attrs_of in stack if tag_of == "pci"]
            dev = int_or_none(attrs.get("dev"))
            sm = int_or_none(attrs.get("sm"))
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
                            int_or_none(attrs.get("count")) or 1))
        stack.append((tag, dict(attrs)))
    if not gpus:
        raise TopologyError("NCCL topology XML has no <gpu> element: expected %s" % EXPECTED[what])
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
                links[a][b] = bridge_link_class(first["bridges"], second["bridges"])
    return links
