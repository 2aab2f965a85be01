# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Merge of the parsed inputs into the nccl_topology facts; disagreements become warnings.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._topology.advice import (
    gpu_pairs,
    advise,
)

from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    NVLINK,
    link_rank,
)


def sysfs_links(sysfs_gpus, link_class):
    """N x N link estimate from the PCI tree (pci_sysfs.link_class)."""
    count = len(sysfs_gpus)
    return [["X" if a == b else link_class(sysfs_gpus[a], sysfs_gpus[b]) for b in range(count)]
            for a in range(count)]


def build_facts(topo=None, p2p_read=None, p2p_write=None, query=None, xml=None, sysfs_gpus=None,
                sysfs_links_matrix=None, rdma_devices=None, sources=None, tp_size=None,
                flashinfer_version=None, warnings=None, server_flags=None):
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

    pairs = gpu_pairs(gpu_count)
    known_pairs = [(a, b) for a, b in pairs if links[a][b] != "UNKNOWN"]
    nvlink = any(NVLINK.match(links[a][b]) for a, b in pairs)
    weakest = None
    if known_pairs and len(known_pairs) == len(pairs):
        weakest = min((links[a][b] for a, b in pairs), key=link_rank)

    all_pairs_p2p = None
    if gpu_count > 1:
        read_matrices = [matrix for matrix in (p2p_r, p2p_w) if matrix is not None]
        if read_matrices:
            all_pairs_p2p = all(matrix[a][b] == "OK" and matrix[b][a] == "OK"
                                for matrix in read_matrices for a, b in pairs)
        elif pairs and all(NVLINK.match(links[a][b]) for a, b in pairs):
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
    facts.update(advise(facts, tp_size=tp_size, flashinfer_version=flashinfer_version, server_flags=server_flags))
    return facts


# FlashInfer's TRT-LLM allreduce kernels (gen_trtllm_comm_module) are built for
# these compute-capability majors: Hopper (9.x) and data-centre Blackwell (10.x).
