# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read-only GPU modules on what a real one-GPU H200 printed on 2026-12-03 (driver 580.159.04).

Each module runs as Ansible runs it, against a stand-in nvidia-smi that replays the captured
output of the exact command line the module gave on that machine (and refuses any other), and
a PCI tree rebuilt from the captured sysfs. The expected answers are read off the raw captures
(the fixture folders' READMEs say where each comes from), not off the modules' output.
"""

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULES = os.path.join(REPO_ROOT, "plugins", "modules")
FIXTURES = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures")
TOPOLOGY = os.path.join(FIXTURES, "topology", "h200-2026-12-03")
HEALTH = os.path.join(FIXTURES, "gpu_health", "h200-2026-12-03")
POWER = os.path.join(FIXTURES, "serving_benchmark", "h200-2026-12-03")
COLLECTOR = os.path.join(REPO_ROOT, "roles", "node_metrics", "files", "gpu_textfile_collector.py")
MIB = 1024 * 1024

# The command lines the modules gave on the H200, and the file holding what nvidia-smi printed.
REPLAYED = {
    "--query-gpu=index,name,pci.bus_id,compute_cap,memory.total,power.limit --format=csv":
        os.path.join(TOPOLOGY, "query_module.txt"),
    "topo -m": os.path.join(TOPOLOGY, "topo_m.txt"),
    "topo -p2p r": os.path.join(TOPOLOGY, "topo_p2p_r.txt"),
    "topo -p2p w": os.path.join(TOPOLOGY, "topo_p2p_w.txt"),
    "-q -x": os.path.join(HEALTH, "q.xml"),
    "--query-gpu=index,pci.bus_id,name,power.draw,power.limit,utilization.gpu,memory.used,memory.total,"
    "temperature.gpu --format=csv,nounits": os.path.join(TOPOLOGY, "collector_query.txt"),
    "--query-gpu=power.draw,utilization.gpu,power.limit --format=csv,noheader,nounits":
        os.path.join(POWER, "power_load_3.csv"),
}

REPLAY = '''#!%s
import json, sys
answers = json.loads(%r)
path = answers.get(" ".join(sys.argv[1:]))
if path is None:
    print("replay: no capture of nvidia-smi %%s" %% " ".join(sys.argv[1:]))
    sys.exit(2)
with open(path) as handle:
    sys.stdout.write(handle.read())
'''


def read(folder, name):
    with open(os.path.join(folder, name)) as handle:
        return handle.read()


@pytest.fixture
def h200_nvidia_smi(tmp_path):
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir()
    path.write_text(REPLAY % (sys.executable, json.dumps(REPLAYED)))
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def h200_sysfs(tmp_path):
    """The captured PCI tree: every device link, the attributes read, the bound drivers."""
    captured = json.loads(read(TOPOLOGY, "sysfs.json"))
    root = tmp_path / "sys"
    for name, text in captured["files"].items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name, target in captured["links"].items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, str(root / name))
    (root / "class").mkdir()
    return str(root)


def run_module(tmp_path, name, **args):
    args_file = tmp_path / ("%s.json" % name)
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO_ROOT, ".collections")] + sys.path))
    proc = subprocess.run([sys.executable, os.path.join(MODULES, name + ".py"), str(args_file)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert "Traceback" not in proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_pci_gpus_finds_the_h200_alone_on_the_root_bus(tmp_path, h200_sysfs):
    result = run_module(tmp_path, "pci_gpus", sysfs_root=h200_sysfs)
    assert result["count"] == 1
    gpu = result["gpus"][0]
    # sysfs: 0000:00:06.0 vendor 0x10de device 0x2335 class 0x030200 bound to nvidia, 32.0 GT/s x16,
    # numa_node -1, directly under pci0000:00 beside five virtio devices.
    assert (gpu["bdf"], gpu["vendor_id"], gpu["device_id"], gpu["class"]) == ("0000:00:06.0", "0x10de", "0x2335",
                                                                              "0x030200")
    assert gpu["driver"] == "nvidia" and gpu["link_speed"] == "32.0 GT/s PCIe" and gpu["link_width"] == 16
    assert gpu["numa_node"] is None and gpu["cpu_affinity"] == "0-15"
    assert gpu["host_bridge"] == "pci0000:00" and gpu["root_port"] is None and gpu["pci_path"] == []


def test_pci_gpus_answers_as_it_did_on_the_h200(tmp_path, h200_sysfs):
    live = json.loads(read(TOPOLOGY, "pci_gpus_live.json"))
    result = run_module(tmp_path, "pci_gpus", sysfs_root=h200_sysfs)
    assert result["gpus"] == live["gpus"]


def test_gpu_health_calls_the_h200_healthy(tmp_path, h200_nvidia_smi):
    log = tmp_path / "kernel.log"
    log.write_text(read(HEALTH, "kernel.log"))
    result = run_module(tmp_path, "gpu_health", nvidia_smi=h200_nvidia_smi, kernel_log_file=str(log),
                        expected_gpu_count=1, require_persistence_mode=True)
    assert result["healthy"] is True and result["action"] == "none" and result["problems"] == []
    # q.xml: driver_version 580.159.04, one attached GPU, NVIDIA H200 at 00000000:00:06.0,
    # persistence Enabled, recovery action None, ECC Enabled.
    assert result["driver_version"] == "580.159.04" and result["gpu_count"] == 1
    gpu = result["gpus"][0]
    assert (gpu["name"], gpu["bus_id"]) == ("NVIDIA H200", "0000:00:06.0")
    assert gpu["readings"]["persistence_mode"] == "Enabled" and gpu["readings"]["recovery_action"] == "None"
    assert gpu["readings"]["ecc_mode"] == "Enabled" and gpu["readings"]["ecc_uncorrectable_volatile"] == 0
    # The kernel log has the driver's lines and no Xid.
    assert result["xids_checked"] is True and gpu["xids"] == []


def test_gpu_health_answers_as_it_did_on_the_h200(tmp_path, h200_nvidia_smi):
    live = json.loads(read(HEALTH, "module_gpu_health_expect1.json"))
    log = tmp_path / "kernel.log"
    log.write_text(read(HEALTH, "kernel.log"))
    result = run_module(tmp_path, "gpu_health", nvidia_smi=h200_nvidia_smi, kernel_log_file=str(log),
                        expected_gpu_count=1, require_persistence_mode=True)
    for key in ("healthy", "verdict", "action", "problems", "gpus", "node_findings", "driver_version"):
        assert result[key] == live[key], key


def test_nccl_topology_reads_one_h200_and_advises_no_fusion(tmp_path, h200_nvidia_smi, h200_sysfs):
    facts = run_module(tmp_path, "nccl_topology", nvidia_smi=h200_nvidia_smi,
                       sysfs_root=h200_sysfs)["ansible_facts"]["nccl_topology"]
    # query: 0, NVIDIA H200, 00000000:00:06.0, 9.0, 143771 MiB, 700.00 W; topo -m: GPU0 X, CPU
    # affinity 0-15, NUMA affinity 0; topo -p2p r and w: X alone.
    assert facts["gpu_count"] == 1 and facts["warnings"] == []
    gpu = facts["gpus"][0]
    assert (gpu["name"], gpu["pci_bus_id"], gpu["compute_capability"]) == ("NVIDIA H200", "0000:00:06.0", "9.0")
    assert gpu["memory_mib"] == 143771 and gpu["power_limit_w"] == 700.0
    assert gpu["cpu_affinity"] == "0-15" and gpu["numa_node"] == 0
    assert facts["gpu_links"] == facts["p2p_read"] == facts["p2p_write"] == [["X"]]
    assert facts["nvlink"] is False and facts["nic_names"] == []
    assert facts["allreduce_fusion_advised"] is False
    assert facts["recommended_env"] == {"NCCL_IB_DISABLE": "1"}


def test_nccl_topology_answers_as_it_did_on_the_h200(tmp_path, h200_nvidia_smi, h200_sysfs):
    live = json.loads(read(TOPOLOGY, "module_live.json"))["ansible_facts"]["nccl_topology"]
    facts = run_module(tmp_path, "nccl_topology", nvidia_smi=h200_nvidia_smi,
                       sysfs_root=h200_sysfs)["ansible_facts"]["nccl_topology"]
    live["sources"]["sysfs"] = h200_sysfs
    assert facts == live


def test_nccl_topology_reads_the_h200_nccl_dump_alike(tmp_path, h200_nvidia_smi, h200_sysfs):
    facts = run_module(tmp_path, "nccl_topology", nvidia_smi=h200_nvidia_smi, sysfs_root=h200_sysfs,
                       nccl_xml_file=os.path.join(TOPOLOGY, "nccl_topo.xml"),
                       run_commands=True)["ansible_facts"]["nccl_topology"]
    assert facts["gpu_count"] == 1 and facts["gpus"][0]["pci_bus_id"] == "0000:00:06.0"
    assert facts["allreduce_fusion_advised"] is False and facts["warnings"] == []


def test_the_node_metrics_collector_writes_the_h200s_series(tmp_path, h200_nvidia_smi):
    log = tmp_path / "kernel.log"
    log.write_text(read(HEALTH, "kernel.log"))
    out = tmp_path / "inferops_gpu.prom"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO_ROOT, ".collections")] + sys.path))
    subprocess.run([sys.executable, COLLECTOR, "--output", str(out), "--nvidia-smi", h200_nvidia_smi,
                    "--kernel-log-command", "cat %s" % log, "--expected-gpus", "1"], env=env, check=True)
    series = {}
    for line in out.read_text().splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            series[name] = float(value)
    labels = '{gpu="0",bus_id="0000:00:06.0",name="NVIDIA H200"}'
    # collector_query.txt: 0, 00000000:00:06.0, NVIDIA H200, 124.58, 700.00, 0, 0, 143771, 41
    assert series["inferops_gpu_query_success"] == 1
    assert series["inferops_gpu_power_draw_watts" + labels] == 124.58
    assert series["inferops_gpu_power_limit_watts" + labels] == 700.0
    assert series["inferops_gpu_utilization_ratio" + labels] == 0.0
    assert series["inferops_gpu_memory_used_bytes" + labels] == 0
    assert series["inferops_gpu_memory_total_bytes" + labels] == 143771 * MIB
    assert series["inferops_gpu_temperature_celsius" + labels] == 41.0
    assert series["inferops_gpu_healthy"] == 1
    assert not any(name.startswith("inferops_gpu_xid_errors_total{") for name in series)
