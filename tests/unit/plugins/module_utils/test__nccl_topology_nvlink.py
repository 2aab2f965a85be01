# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_topology on two real NVLink-connected H200s, checked against NCCL's own INFO log.

The captures in fixtures/topology/h200x2-2026-11-29/ come from one machine: nvidia-smi's
matrices, a two-rank NCCL job's topology dump and its INFO log (see the README there).
"""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import re

from ansible_collections.inferops.serving.plugins.module_utils._topology.matrix import (
    parse_topo_matrix,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.merge import (
    build_facts,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.p2p import (
    parse_p2p_matrix,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.query_gpu import (
    parse_query_gpu,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.nccl_xml import (
    parse_nccl_xml,
)

CAPTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "topology", "h200x2-2026-11-29")

# "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL) ..." : NCCL's path from one GPU to each other.
NCCL_GPU_PATHS = re.compile(r"NCCL INFO GPU/(?P<src>[0-9a-f-]+) :(?P<paths>.*)$")
NCCL_PATH = re.compile(r"GPU/(?P<dst>[0-9a-f-]+) \((?P<hops>\d+)/(?P<bw>[\d.]+)/(?P<type>[A-Z]+)\)")
# "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM": the transport NCCL chose between two ranks.
NCCL_CHANNEL = re.compile(r"Channel \d+/\d+ : (\d+)\[\d+\] -> (\d+)\[\d+\] via (\S+)")


def read(name):
    with open(os.path.join(CAPTURE, name)) as handle:
        return handle.read()


def facts(**extra):
    return build_facts(
        topo=parse_topo_matrix(read("topo_m.txt")),
        p2p_read=parse_p2p_matrix(read("topo_p2p_r.txt")),
        p2p_write=parse_p2p_matrix(read("topo_p2p_w.txt")),
        query=parse_query_gpu(read("query_module.txt")),
        xml=parse_nccl_xml(read("nccl_topo_2rank.xml")),
        **extra)


def nccl_log():
    return read("nccl_2rank.txt").splitlines()


def nccl_gpu_path_types():
    """{(src bus, dst bus): NCCL path type} from the first rank's topology listing."""
    types = {}
    for line in nccl_log():
        match = NCCL_GPU_PATHS.search(line)
        if match:
            for path in NCCL_PATH.finditer(match.group("paths")):
                if path.group("dst") != match.group("src"):
                    types[(match.group("src"), path.group("dst"))] = path.group("type")
    return types


def test_the_capture_is_two_h200s_on_nvlink():
    result = facts()
    assert result["gpu_count"] == 2
    assert [gpu["sm"] for gpu in result["gpus"]] == [90, 90]
    assert result["gpu_links"] == [["X", "NV18"], ["NV18", "X"]]
    assert result["p2p_read"] == [["X", "OK"], ["OK", "X"]]
    assert result["p2p_write"] == [["X", "OK"], ["OK", "X"]]
    assert result["nvlink"] is True
    assert result["weakest_link"] == "NV18"
    assert result["all_pairs_p2p"] is True


def test_link_classes_agree_with_the_paths_nccl_computed():
    paths = nccl_gpu_path_types()
    assert paths, "no GPU path listing in the NCCL log"
    # Every GPU pair NCCL saw is an NVLink path, as the module's matrix says.
    assert set(paths.values()) == {"NVL"}
    links = facts()["gpu_links"]
    assert all(links[i][j].startswith("NV") for i in range(2) for j in range(2) if i != j)


def test_p2p_agrees_with_the_transport_nccl_chose():
    channels = [NCCL_CHANNEL.search(line) for line in nccl_log()]
    transports = {match.group(3) for match in channels if match}
    assert transports, "no channel connections in the NCCL log"
    # NCCL connected the two ranks over P2P only (no SHM or NET fallback) ...
    assert all(transport.startswith("P2P/") for transport in transports)
    assert any("isAllCudaP2p 1" in line for line in nccl_log())
    # ... which is what the module reports from nvidia-smi.
    assert facts()["all_pairs_p2p"] is True


def test_advice_for_nvlink_gpus_leaves_p2p_and_fusion_open():
    result = facts(tp_size=2)
    # Hopper with P2P on every pair: the topology does not rule fusion out.
    assert result["allreduce_fusion_advised"] is True
    assert "disable-custom-all-reduce" not in result["recommended_sglang_args"]
    assert "NCCL_P2P_DISABLE" not in result["recommended_env"]
    assert "NCCL_P2P_LEVEL" not in result["recommended_env"]


def test_the_module_on_that_machine_said_the_same():
    live = read("module_live_tp2.txt")
    for expected in ("all_pairs_p2p: true", "allreduce_fusion_advised: true", "nvlink: true",
                     "weakest_link: NV18"):
        assert expected in live
