# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers and advice of nccl_topology, fed with real outputs (fixtures/topology/README.md)."""

import os
import re
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.installed_options import (
    SourceTree,
    read_server_options,
)
from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    TopologyError,
)
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
    cpumask_to_list,
    parse_nccl_xml,
)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "topology")
H200 = os.path.join(FIXTURES, "h200-2026-11-29")
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
SIM_SMI = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim", "nvidia-smi")


def read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


def sim(*args, **env):
    return subprocess.run([sys.executable, SIM_SMI] + list(args), check=True, stdout=subprocess.PIPE,
                          universal_newlines=True, env=dict(os.environ, **env)).stdout


def sim_status(*args):
    proc = subprocess.run([sys.executable, SIM_SMI] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


# --- topo -m ---------------------------------------------------------------

# file -> (GPU count, {(i, j): link}, NIC names, NUMA node per GPU, CPU affinity of GPU0)
TOPO_MATRICES = {
    "01_2x5090_wrx80_phb_tabs_gpunumaid.txt": (2, {(0, 1): "PHB"}, [], [0, 0], "0-63"),
    "06_4gpu_4090_a6000_5090_phb_spaces.txt": (4, {(0, 3): "PHB", (2, 1): "PHB"}, [], [0] * 4, "0-15"),
    "08_5x5060ti_epyc_node_phb_tabs.txt": (5, {(0, 1): "NODE", (3, 4): "PHB", (4, 2): "NODE"}, [], [0] * 5, "0-63"),
    "10_4xL40S_2nics_nic_legend_spaces.txt": (4, {(0, 1): "NODE", (1, 2): "SYS", (2, 3): "NODE"},
                                              ["mlx5_0", "mlx5_1"], [0, 0, 1, 1], "0-95,192-287"),
    "12_8xH100_topo_mp_12nics_cpulist.txt": (8, {(0, 3): "NODE", (3, 4): "SYS", (7, 4): "NODE"},
                                             ["mlx5_%d" % n for n in range(12)], [0] * 4 + [1] * 4, "0,2,4,6,8,10"),
    "14_2xL4_sys_numa0_2_tabs_no_legend.txt": (2, {(0, 1): "SYS"}, [], [0, 2], "0-7,32-39"),
    "16_4xV100_traverse_nv3_mlx5_numa8.txt": (4, {(0, 1): "NV3", (1, 2): "SYS", (2, 3): "NV3"},
                                              ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], [0, 0, 8, 8], "0-63"),
    "18_2xH100pcie_nv12_bridge_md_indented.txt": (2, {(0, 1): "NV12"}, [], [1, 1], "32-63,96-127"),
    "h200-2026-11-29/topo_m.txt": (1, {}, [], [0], "0-15"),
    "h200-2026-11-29/topo_mp.txt": (1, {}, [], [0], "0-15"),
}


@pytest.mark.parametrize("name", sorted(TOPO_MATRICES))
def test_topology_matrix_fixtures(name):
    count, links, nics, numa, cpu0 = TOPO_MATRICES[name]
    parsed = parse_topo_matrix(read(FIXTURES, name))
    matrix = parsed["gpu_links"]
    assert len(matrix) == count and all(len(row) == count for row in matrix)
    assert all(matrix[i][i] == "X" for i in range(count))
    for (i, j), link in links.items():
        assert matrix[i][j] == link and matrix[j][i] == link
    assert parsed["nic_names"] == nics
    assert [row["numa_node"] for row in parsed["gpu_rows"]] == numa
    assert parsed["gpu_rows"][0]["cpu_affinity"] == cpu0
    assert parsed["warnings"] == []


def test_every_fixture_file_is_covered_by_a_test():
    covered = set(TOPO_MATRICES) | set(P2P_MATRICES) | set(QUERY_FILES) | set(XML_FILES)
    listed = set(name for name in os.listdir(FIXTURES) if name[:2].isdigit())
    assert listed <= covered


def test_simulated_nvidia_smi_has_the_seed_topology():
    parsed = parse_topo_matrix(sim("topo", "-m"))
    assert len(parsed["gpu_links"]) == 8
    assert set(cell for row in parsed["gpu_links"] for cell in row) == {"X", "PHB"}
    # As the real H200 VMs print it: NUMA affinity 0 though the guest's sysfs says numa_node -1.
    assert all(row == {"cpu_affinity": "0-63", "numa_node": 0} for row in parsed["gpu_rows"])
    assert parsed["warnings"] == []


def glue_prompt(text):
    lines = text.split("\n")
    at = next(number for number, line in enumerate(lines) if "GPU0" in line)
    lines[at] = "root@gpu-node:~# nvidia-smi topo -m" + lines[at]
    return "\n".join(lines)


@pytest.mark.parametrize("variant", [
    lambda text: text.replace("\n", "\r\n"),
    lambda text: "\n".join("    " + line for line in text.split("\n")),
    lambda text: text.replace("\t", "        "),
    lambda text: text.split("\nLegend")[0],
    lambda text: text.replace("(e.g., QPI/UPI)", "(e.g.,\nQPI/UPI)"),
    lambda text: "\x1b[1m" + text + "\x1b[0m",
    # Underlined header labels copied from a web page: the codes kept, their ESC byte lost.
    lambda text: re.sub(r"(?m)^(\s*)(GPU0.*)$", lambda m: m.group(1) + re.sub(r"(\S+)", r"[4m\1[0m", m.group(2)),
                        text, count=1),
], ids=["crlf", "indented", "tabs-expanded", "no-legend", "wrapped-legend", "extra-ansi", "ansi-without-esc"])
def test_layout_noise_does_not_change_the_matrix(variant):
    text = read(FIXTURES, "10_4xL40S_2nics_nic_legend_spaces.txt")
    assert parse_topo_matrix(variant(text))["gpu_links"] == parse_topo_matrix(text)["gpu_links"]


def test_oldest_header_generation_with_cpu_affinity_only():
    lines = read(FIXTURES, "16_4xV100_traverse_nv3_mlx5_numa8.txt").split("\n")
    old = "\n".join(line.rsplit("\t", 1)[0] if line.startswith(("\t", "GPU", "mlx5")) else line for line in lines)
    assert "NUMA Affinity" not in old
    parsed = parse_topo_matrix(old)
    assert parsed["gpu_links"][0][1] == "NV3" and parsed["nic_names"][3] == "mlx5_3"
    assert [row["cpu_affinity"] for row in parsed["gpu_rows"]] == ["0-63", "0-63", "64-127", "64-127"]
    assert all(row["numa_node"] is None for row in parsed["gpu_rows"])
    assert parsed["warnings"] == []


def test_shell_prompt_glued_to_the_header_is_dropped_with_a_warning():
    parsed = parse_topo_matrix(glue_prompt(sim("topo", "-m")))
    assert len(parsed["gpu_links"]) == 8
    assert any("nvidia-smi topo -m" in warning for warning in parsed["warnings"])


def test_nic_names_stay_aliases_with_a_warning_when_the_nic_legend_is_cut():
    text = read(FIXTURES, "10_4xL40S_2nics_nic_legend_spaces.txt").split("NIC Legend")[0]
    parsed = parse_topo_matrix(text)
    assert parsed["nic_names"] == ["NIC0", "NIC1"]
    assert any("NIC0" in warning for warning in parsed["warnings"])


@pytest.mark.parametrize("damage, row", [
    (lambda text: text.replace("GPU2\tPHB\tPHB\t X \tPHB", "GPU2\tPHB\t X \tPHB", 1), "GPU2"),
    (lambda text: text.replace("GPU5\tPHB", "GPU5\tPBH", 1), "GPU5"),
    (lambda text: text.replace("GPU3\tPHB\tPHB\tPHB\t X ", "GPU3\tPHB\tPHB\tPHB\tPHB", 1), "GPU3"),
], ids=["missing-cell", "bad-class", "diagonal-not-x"])
def test_corrupted_gpu_row_is_an_error_naming_the_row(damage, row):
    text = sim("topo", "-m")
    damaged = damage(text)
    assert damaged != text
    with pytest.raises(TopologyError, match="row '%s" % row):
        parse_topo_matrix(damaged)


def test_outputs_saved_into_one_file_are_read_one_block_each():
    bundle = sim("topo", "-m") + "\n$ nvidia-smi topo -p2p r\n" + sim("topo", "-p2p", "r")
    assert parse_topo_matrix(bundle)["gpu_links"] == parse_topo_matrix(sim("topo", "-m"))["gpu_links"]
    p2p_first = sim("topo", "-p2p", "r") + "\n" + sim("topo", "-p2p", "w").replace("NS", "OK")
    assert parse_p2p_matrix(p2p_first)["matrix"][0][1] == "NS"


def test_cut_matrix_is_an_error_naming_the_missing_rows():
    text = sim("topo", "-m")
    cut = "\n".join(text.split("\n")[:6])
    with pytest.raises(TopologyError, match="GPU5, GPU6, GPU7"):
        parse_topo_matrix(cut)


def test_corrupted_nic_row_is_ignored_with_a_warning():
    text = read(FIXTURES, "10_4xL40S_2nics_nic_legend_spaces.txt")
    text = text.replace("NIC1    SYS     SYS     NODE", "NIC1    SYS     SYS     ????")
    parsed = parse_topo_matrix(text)
    assert len(parsed["gpu_links"]) == 4
    assert any("row NIC1 ignored" in warning for warning in parsed["warnings"])


def test_affinity_values_that_do_not_fit_the_header_are_left_unknown():
    text = read(FIXTURES, "01_2x5090_wrx80_phb_tabs_gpunumaid.txt").replace("0-63\t0\t\tN/A", "0-63", 1)
    parsed = parse_topo_matrix(text)
    assert parsed["gpu_rows"][0] == {"cpu_affinity": None, "numa_node": None}
    assert parsed["gpu_rows"][1]["numa_node"] == 0
    assert any("GPU0" in warning for warning in parsed["warnings"])


@pytest.mark.parametrize("text, expected", [
    ("", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "GPU0"),
    ("\tGPU1\tGPU0\tCPU Affinity\nGPU1\t X \tPHB\t0-1\n", "GPU0"),
])
def test_unreadable_matrix_says_what_was_expected(text, expected):
    with pytest.raises(TopologyError, match=expected):
        parse_topo_matrix(text)


# --- topo -p2p -------------------------------------------------------------

P2P_MATRICES = {
    "02_2x5090_p2p_rw_gns_tabs.txt": (2, "GNS"),
    "04_2gpu_p2p_rw_ns_spaces_indented.txt": (2, "NS"),
    "22_vm_cloudhypervisor_8gpu_p2p_r_ok.txt": (8, "OK"),
    "h200-2026-11-29/topo_p2p_r.txt": (1, None),
    "h200-2026-11-29/topo_p2p_w.txt": (1, None),
}


@pytest.mark.parametrize("name", sorted(P2P_MATRICES))
def test_p2p_fixtures(name):
    count, status = P2P_MATRICES[name]
    parsed = parse_p2p_matrix(read(FIXTURES, name))
    matrix = parsed["matrix"]
    assert len(matrix) == count
    assert all(matrix[i][j] == ("X" if i == j else status) for i in range(count) for j in range(count))
    assert parsed["warnings"] == []


def test_simulated_p2p_is_not_supported_anywhere():
    for kind in "rw":
        matrix = parse_p2p_matrix(sim("topo", "-p2p", kind))["matrix"]
        assert len(matrix) == 8
        assert set(cell for row in matrix for cell in row) == {"X", "NS"}


def test_p2p_row_with_a_missing_cell_is_an_error_naming_the_row():
    text = read(FIXTURES, "22_vm_cloudhypervisor_8gpu_p2p_r_ok.txt").replace(" GPU4\tOK\tOK", " GPU4\tOK", 1)
    with pytest.raises(TopologyError, match="GPU4"):
        parse_p2p_matrix(text)


def test_unknown_p2p_status_is_kept_and_warned_about():
    text = read(FIXTURES, "02_2x5090_p2p_rw_gns_tabs.txt").replace("GNS", "XYZ")
    parsed = parse_p2p_matrix(text)
    assert parsed["matrix"][0][1] == "XYZ"
    assert parsed["warnings"]


# --- --query-gpu -----------------------------------------------------------

# file -> list of (index, name, bus id, compute capability, sm, memory MiB, power limit W)
QUERY_FILES = {
    "24_query_gpu_compute_cap_csv.txt": [(0, "NVIDIA TITAN V", None, "7.0", 70, None, None),
                                         (1, "NVIDIA RTX 5880 Ada Generation", None, "8.9", 89, None, None)],
    "h200-2026-11-29/query_module.txt": [(0, "NVIDIA H200", "0000:00:06.0", "9.0", 90, 143771, 700.0)],
    "h200-2026-11-29/query_all.txt": [(0, "NVIDIA H200", "0000:00:06.0", "9.0", 90, 143771, 700.0)],
    "h200-2026-11-29/query_all_nounits.txt": [(0, "NVIDIA H200", "0000:00:06.0", "9.0", 90, 143771, 700.0)],
    "h200-2026-11-29/query_reordered.txt": [(0, None, "0000:00:06.0", "9.0", 90, None, 700.0)],
}


def summarize(gpus):
    return [(gpu["index"], gpu["name"], gpu["pci_bus_id"], gpu["compute_capability"], gpu["sm"], gpu["memory_mib"],
             gpu["power_limit_w"]) for gpu in gpus]


@pytest.mark.parametrize("name", sorted(QUERY_FILES))
def test_query_gpu_fixtures(name):
    parsed = parse_query_gpu(read(FIXTURES, name))
    assert summarize(parsed["gpus"]) == QUERY_FILES[name]


@pytest.mark.parametrize("fmt", ["csv", "csv,nounits", "csv,noheader", "csv,noheader,nounits"])
def test_simulated_query_gpu_in_every_format(fmt):
    out = sim("--query-gpu=index,name,pci.bus_id,compute_cap,memory.total,power.limit", "--format=" + fmt)
    gpus = parse_query_gpu(out)["gpus"]
    assert len(gpus) == 8
    assert summarize(gpus)[7] == (7, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "0000:08:00.0", "12.0", 120,
                                  97887, 600.0)


def test_query_gpu_without_header_in_another_order_is_an_error_that_says_what_to_do():
    with pytest.raises(TopologyError, match="without a header line must list index,name"):
        parse_query_gpu(read(H200, "query_all_noheader.txt"))


def test_query_gpu_paste_with_the_command_before_it():
    text = "$ nvidia-smi --query-gpu=index,name --format=csv\n" + read(H200, "query_reordered.txt")
    parsed = parse_query_gpu(text)
    assert summarize(parsed["gpus"]) == QUERY_FILES["h200-2026-11-29/query_reordered.txt"]
    assert parsed["warnings"]


def test_query_gpu_line_with_a_missing_value_is_an_error_naming_the_line():
    text = read(H200, "query_module.txt").replace(", 9.0", "")
    with pytest.raises(TopologyError, match="NVIDIA H200"):
        parse_query_gpu(text)


def test_query_gpu_not_available_values_become_null():
    parsed = parse_query_gpu("index, name, compute_cap, power.limit [W]\n0, NVIDIA A10, 8.6, [N/A]\n")
    assert parsed["gpus"][0]["power_limit_w"] is None and parsed["gpus"][0]["sm"] == 86


# --- NCCL topology XML -----------------------------------------------------

# file -> (links, NIC names, NUMA nodes, sm list, bus ids, CPU affinity of GPU0)
XML_FILES = {
    "26_vm_kvm_4xA800_nccl_topo.xml": (
        [["X", "PHB", "PHB", "PHB"], ["PHB", "X", "PHB", "PHB"], ["PHB", "PHB", "X", "PHB"],
         ["PHB", "PHB", "PHB", "X"]],
        ["ens4"], [None] * 4, [80] * 4, ["0000:00:09.0", "0000:00:0a.0", "0000:00:0b.0", "0000:00:0c.0"], None),
    "29_2xA100pcie_nccl2_30_topo.xml": (
        [["X", "SYS"], ["SYS", "X"]], ["mlx5_0", "mlx5_1"], [0, 1], [80, 80], ["0000:69:00.0", "0000:b1:00.0"],
        "0-27,56-83"),
    "h200-2026-11-29/nccl_topo.xml": ([["X"]], ["eth0"], [None], [90], ["0000:00:06.0"], None),
}


@pytest.mark.parametrize("name", sorted(XML_FILES))
def test_nccl_xml_fixtures(name):
    links, nics, numa, sms, buses, cpu0 = XML_FILES[name]
    parsed = parse_nccl_xml(read(FIXTURES, name))
    assert parsed["gpu_links"] == links
    assert parsed["nic_names"] == nics
    assert [gpu["numa_node"] for gpu in parsed["gpus"]] == numa
    assert [gpu["sm"] for gpu in parsed["gpus"]] == sms
    assert [gpu["pci_bus_id"] for gpu in parsed["gpus"]] == buses
    assert parsed["gpus"][0]["cpu_affinity"] == cpu0
    assert parsed["warnings"] == []


def test_truncated_xml_is_read_up_to_the_cut_with_a_warning():
    text = read(FIXTURES, "29_2xA100pcie_nccl2_30_topo.xml")
    cut = text[:text.index('gdr="1"/>', text.index('<gpu dev="1"')) + 16]
    assert cut.endswith('gdr="1"/>\n    </')
    parsed = parse_nccl_xml(cut)
    assert [gpu["index"] for gpu in parsed["gpus"]] == [0, 1]
    assert parsed["gpu_links"][0][1] == "SYS"
    assert any("cut or damaged" in warning for warning in parsed["warnings"])


def test_markdown_residue_after_the_xml_is_ignored_with_a_warning():
    parsed = parse_nccl_xml(read(FIXTURES, "26_vm_kvm_4xA800_nccl_topo.xml").rstrip() + "**\n")
    assert len(parsed["gpus"]) == 4
    assert any("after </system>" in warning for warning in parsed["warnings"])


def test_nvlink_elements_give_nv_links():
    text = """<system version="1"><cpu numaid="0" affinity="ff">
      <pci busid="0000:01:00.0" class="0x060400"><pci busid="0000:02:00.0" class="0x030200">
        <gpu dev="0" sm="90"><nvlink target="0000:03:00.0" count="18" tclass="0x030200"/></gpu></pci>
      <pci busid="0000:03:00.0" class="0x030200"><gpu dev="1" sm="90"/></pci></pci></cpu></system>"""
    parsed = parse_nccl_xml(text)
    assert parsed["gpu_links"] == [["X", "NV18"], ["NV18", "X"]]
    assert parsed["gpus"][0]["cpu_affinity"] == "0-7"


@pytest.mark.parametrize("text", ["", "<system version=", "<html><body>502</body></html>",
                                  '<system version="1"><cpu numaid="0"></cpu></system>'])
def test_unreadable_xml_says_what_was_expected(text):
    with pytest.raises(TopologyError, match="NCCL_TOPO_DUMP_FILE"):
        parse_nccl_xml(text)


@pytest.mark.parametrize("mask, cpus", [("ff", "0-7"), ("0000,000fffff,ff000000,0fffffff", "0-27,56-83"),
                                        ("5", "0,2"), ("", None)])
def test_cpu_masks(mask, cpus):
    assert cpumask_to_list(mask) == cpus


# --- facts and advice ------------------------------------------------------

def seed_facts(**kwargs):
    return build_facts(
        topo=parse_topo_matrix(sim("topo", "-m")),
        p2p_read=parse_p2p_matrix(sim("topo", "-p2p", "r")),
        p2p_write=parse_p2p_matrix(sim("topo", "-p2p", "w")),
        query=parse_query_gpu(sim("--query-gpu=index,name,pci.bus_id,compute_cap,memory.total,power.limit",
                                  "--format=csv")),
        **kwargs)


def test_seed_machine_does_not_advise_allreduce_fusion_and_says_why():
    facts = seed_facts()
    assert facts["gpu_count"] == 8
    assert facts["weakest_link"] == "PHB" and facts["nvlink"] is False
    assert facts["all_pairs_p2p"] is False
    assert facts["allreduce_fusion_advised"] is False
    verdict = [reason for reason in facts["reasons"] if "allreduce fusion not advised" in reason]
    assert len(verdict) == 1 and "P2P is missing" in verdict[0] and "SM120" in verdict[0]
    assert facts["recommended_env"] == {"NCCL_IB_DISABLE": "1"}
    assert facts["recommended_sglang_args"] == {"disable-custom-all-reduce": True}
    assert [gpu["sm"] for gpu in facts["gpus"]] == [120] * 8
    assert facts["warnings"] == []


def test_a_newer_flashinfer_does_not_make_fusion_work_without_p2p():
    facts = seed_facts(flashinfer_version="0.6.17")
    assert facts["allreduce_fusion_advised"] is False
    assert not any("SM120" in reason for reason in facts["reasons"] if "fusion not advised" in reason)


def nvlink_facts(sm, tp=None, flashinfer_version=None, p2p="OK"):
    return build_facts(**dict(nvlink_inputs(sm, p2p), tp_size=tp, flashinfer_version=flashinfer_version))


def nvlink_inputs(sm, p2p="OK"):
    count = 4
    topo = {"gpu_links": [["X" if a == b else "NV18" for b in range(count)] for a in range(count)],
            "gpu_rows": [{"cpu_affinity": "0-63", "numa_node": 0}] * count, "nic_names": ["mlx5_0"],
            "warnings": []}
    p2p_matrix = {"matrix": [["X" if a == b else p2p for b in range(count)] for a in range(count)], "warnings": []}
    query = {"gpus": [{"index": i, "name": "GPU", "pci_bus_id": "0000:%02x:00.0" % (i + 1),
                       "compute_capability": "%d.%d" % (sm // 10, sm % 10), "sm": sm, "memory_mib": 1,
                       "power_limit_w": 1.0} for i in range(count)], "warnings": []}
    return {"topo": topo, "p2p_read": p2p_matrix, "query": query}


@pytest.mark.parametrize("sm, tp, flashinfer, p2p, advised", [
    (90, None, None, "OK", True),
    (100, 4, None, "OK", True),
    (90, 1, None, "OK", False),
    (120, None, "0.6.3", "OK", False),
    (120, None, "0.6.17", "OK", True),
    (120, None, None, "OK", False),
    (80, None, None, "OK", False),
    (90, None, None, "CNS", False),
])
def test_allreduce_fusion_needs_p2p_tp_and_a_supported_architecture(sm, tp, flashinfer, p2p, advised):
    facts = nvlink_facts(sm, tp, flashinfer, p2p)
    assert facts["allreduce_fusion_advised"] is advised
    assert facts["reasons"][-1].startswith("allreduce fusion advised" if advised else "allreduce fusion not advised")


def test_rdma_nic_keeps_the_ib_transport():
    facts = nvlink_facts(90)
    assert "NCCL_IB_DISABLE" not in facts["recommended_env"]
    assert facts["nvlink"] is True and facts["weakest_link"] == "NV18"


def test_p2p_across_the_host_bridge_raises_the_nccl_p2p_level():
    facts = build_facts(topo=parse_topo_matrix(read(FIXTURES, "08_5x5060ti_epyc_node_phb_tabs.txt")),
                        p2p_read=parse_p2p_matrix(
                            "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\n" + "\n".join(
                                "GPU%d\t%s" % (a, "\t".join("X" if a == b else "OK" for b in range(5)))
                                for a in range(5))))
    assert facts["all_pairs_p2p"] is True and facts["weakest_link"] == "NODE"
    assert facts["recommended_env"] == {"NCCL_P2P_LEVEL": "SYS", "NCCL_IB_DISABLE": "1"}
    assert "disable-custom-all-reduce" not in facts["recommended_sglang_args"]


def test_p2p_missing_on_some_pairs_disables_custom_allreduce_but_not_nccl_p2p():
    p2p = parse_p2p_matrix("\tGPU0\tGPU1\tGPU2\nGPU0\tX\tOK\tNS\nGPU1\tOK\tX\tNS\nGPU2\tNS\tNS\tX\n")
    topo = parse_topo_matrix("\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU0\t X \tPIX\tSYS\t0-7\n"
                             "GPU1\tPIX\t X \tSYS\t0-7\nGPU2\tSYS\tSYS\t X \t8-15\n")
    facts = build_facts(topo=topo, p2p_read=p2p)
    assert facts["all_pairs_p2p"] is False
    assert facts["recommended_sglang_args"] == {"disable-custom-all-reduce": True}
    assert "NCCL_P2P_DISABLE" not in facts["recommended_env"]
    assert any("2 of 3 GPU pairs" in reason for reason in facts["reasons"])


def test_h200_capture_gives_one_gpu_and_nothing_to_fuse():
    facts = build_facts(topo=parse_topo_matrix(read(H200, "topo_m.txt")),
                        p2p_read=parse_p2p_matrix(read(H200, "topo_p2p_r.txt")),
                        query=parse_query_gpu(read(H200, "query_module.txt")),
                        xml=parse_nccl_xml(read(H200, "nccl_topo.xml")))
    assert facts["gpu_count"] == 1
    assert facts["gpus"][0]["name"] == "NVIDIA H200" and facts["gpus"][0]["sm"] == 90
    assert facts["all_pairs_p2p"] is None and facts["weakest_link"] is None
    assert facts["allreduce_fusion_advised"] is False
    assert "tensor parallel size is 1" in facts["reasons"][-1]
    assert facts["warnings"] == []


def test_disagreeing_inputs_are_reported_not_silently_merged():
    facts = build_facts(topo=parse_topo_matrix(read(FIXTURES, "10_4xL40S_2nics_nic_legend_spaces.txt")),
                        query=parse_query_gpu(read(FIXTURES, "24_query_gpu_compute_cap_csv.txt")))
    assert facts["gpu_count"] == 2
    assert any("GPU counts disagree" in warning for warning in facts["warnings"])
    assert facts["gpu_links"] == [["X", "UNKNOWN"], ["UNKNOWN", "X"]]
    assert facts["weakest_link"] is None


# --- the lab's simulated nvidia-smi ---------------------------------------

def test_simulated_load_follows_the_lab_load_file(tmp_path):
    load = tmp_path / "gpu-load.json"
    load.write_text('{"power_w": 250, "util_pct": 35}')
    fields = ["--query-gpu=power.draw,utilization.gpu", "--format=csv,noheader"]
    assert sim(*fields, INFEROPS_LAB_GPU_LOAD=str(load)).split("\n")[0] == "250.00 W, 35 %"
    assert sim(*fields, INFEROPS_LAB_GPU_LOAD=str(tmp_path / "absent")).split("\n")[0] == "30.00 W, 0 %"


def test_simulated_driver_version_and_gpu_count_can_be_set():
    out = sim("--query-gpu=index,driver_version", "--format=csv,noheader", INFEROPS_LAB_DRIVER_VERSION="590.44.01",
              INFEROPS_LAB_GPU_COUNT="2")
    assert out == "0, 590.44.01\n1, 590.44.01\n"
    assert len(parse_topo_matrix(sim("topo", "-m", INFEROPS_LAB_GPU_COUNT="2"))["gpu_links"]) == 2


@pytest.mark.parametrize("args, captured", [
    (["--bogus"], "err_unknown_option"),
    (["topo", "-p2p"], "err_p2p_no_value"),
    (["topo", "-p2p", "x"], "err_p2p_bad_value"),
    (["--query-gpu=bogus", "--format=csv"], "err_query_bad_field"),
    (["--query-gpu=index", "--format=json"], "err_query_bad_format"),
    (["-i", "99", "--query-gpu=index", "--format=csv"], "err_bad_id"),
])
def test_simulated_complaints_match_the_real_tool(args, captured):
    rc, out, err = sim_status(*args)
    assert (rc, out, err) == (int(read(H200, captured + ".rc")), read(H200, captured + ".txt"), "")


def test_simulated_formats_match_the_real_tool_line_for_line():
    real_header = read(H200, "topo_m.txt").split("\n")[0]
    assert sim("topo", "-m", INFEROPS_LAB_GPU_COUNT="1").split("\n")[0] == real_header
    assert sim("topo", "-p2p", "r", INFEROPS_LAB_GPU_COUNT="1").split("\n")[0] == \
        read(H200, "topo_p2p_r.txt").split("\n")[0]
    fields = "--query-gpu=index,name,pci.bus_id,compute_cap,memory.total,memory.used,power.limit,power.draw," \
             "utilization.gpu,driver_version,uuid,serial,temperature.gpu,persistence_mode"
    for fmt, captured in (("csv", "query_all"), ("csv,nounits", "query_all_nounits")):
        assert sim(fields, "--format=" + fmt).split("\n")[0] == read(H200, captured + ".txt").split("\n")[0]
    assert sim("-L").startswith("GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-")


def test_a_header_whose_underline_codes_lost_their_esc_byte_is_still_the_header():
    text = "\t[4mGPU0[0m\t[4mGPU1[0m\t[4mCPU Affinity[0m\t[4mNUMA Affinity[0m\nGPU0\t X \tPHB\t0-15\t0\nGPU1\tPHB\t X \t0-15\t0\n"
    parsed = parse_topo_matrix(text)
    assert parsed["gpu_links"] == [["X", "PHB"], ["PHB", "X"]]
    assert [row["cpu_affinity"] for row in parsed["gpu_rows"]] == ["0-15", "0-15"]


NCCL_XML_TREE = """<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel">
    <pci busid="0000:10:00.0" class="0x060400">
      <pci busid="0000:11:00.0" class="0x060400">
        <pci busid="0000:12:00.0" class="0x030200"><gpu dev="0" sm="90" rank="0" gdr="1"/></pci>
        <pci busid="0000:13:00.0" class="0x030200"><gpu dev="1" sm="90" rank="1" gdr="1"/></pci>
      </pci>
      <pci busid="0000:14:00.0" class="0x060400">
        <pci busid="0000:15:00.0" class="0x060400">
          <pci busid="0000:16:00.0" class="0x030200"><gpu dev="2" sm="90" rank="2" gdr="1"/></pci>
        </pci>
      </pci>
    </pci>
    <pci busid="0000:20:00.0" class="0x030200"><gpu dev="3" sm="90" rank="3" gdr="1"/></pci>
  </cpu>
  <cpu numaid="1" affinity="ffff0000" arch="x86_64" vendor="GenuineIntel">
    <pci busid="0000:80:00.0" class="0x030200"><gpu dev="4" sm="90" rank="4" gdr="1"/></pci>
  </cpu>
</system>
"""


def test_nccl_xml_links_follow_the_pci_tree_as_nvidia_smi_does():
    links = parse_nccl_xml(NCCL_XML_TREE)["gpu_links"]
    assert links[0][1] == "PIX"   # one switch
    assert links[0][2] == "PXB"   # a bridge further up
    assert links[0][3] == "PHB"   # only the CPU
    assert links[0][4] == "SYS"   # another NUMA node
    assert all(links[a][b] == links[b][a] for a in range(5) for b in range(5))


# --- the fusion's switches, as each real release spells them ---------------------------------

def release_flags(version):
    sources = SourceTree(os.path.join(os.path.dirname(__file__), "fixtures", "sglang", version), suffix=".txt")
    return sorted(read_server_options(sources)["spec"]["option_strings"])


def test_without_p2p_the_verdict_names_the_switch_that_keeps_fusion_off_in_todays_sglang():
    # On the seed's VM SGLang 0.5.23 with a FlashInfer that builds SM12x could turn fusion on for
    # a model by itself: the verdict says how to keep it off, in that release's own words.
    facts = seed_facts(flashinfer_version="0.7.2", server_flags=release_flags("0.5.23"))
    assert facts["allreduce_fusion_advised"] is False
    assert facts["allreduce_fusion_flags"] == {"on": "--flashinfer-allreduce-fusion-backend",
                                               "off": "--enforce-disable-flashinfer-allreduce-fusion"}
    verdict = [reason for reason in facts["reasons"] if "allreduce fusion not advised" in reason][0]
    assert verdict.endswith("this SGLang keeps it off whatever the model's defaults with "
                            "--enforce-disable-flashinfer-allreduce-fusion")


def test_the_seed_release_has_no_off_switch_and_the_verdict_says_to_leave_the_flag_out():
    facts = seed_facts(server_flags=release_flags("0.5.9"))
    assert facts["allreduce_fusion_flags"] == {"on": "--enable-flashinfer-allreduce-fusion", "off": None}
    verdict = [reason for reason in facts["reasons"] if "allreduce fusion not advised" in reason][0]
    assert verdict.endswith("this SGLang has no switch that forces it off: leave --enable-flashinfer-allreduce-fusion out")


def test_where_fusion_is_advised_the_verdict_names_the_releases_switch_to_turn_it_on():
    facts = build_facts(**dict(nvlink_inputs(90), server_flags=release_flags("0.5.23")))
    assert facts["allreduce_fusion_advised"] is True
    assert "this SGLang turns it on with --flashinfer-allreduce-fusion-backend=auto" in " ".join(facts["reasons"])


def test_without_the_releases_options_the_verdict_names_no_switch():
    facts = seed_facts()
    assert facts["allreduce_fusion_flags"] is None
    assert not any("this SGLang" in reason for reason in facts["reasons"])
