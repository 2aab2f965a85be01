# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_topology module as Ansible runs it: its file, executed with a JSON arguments file."""

import os
import subprocess
import sys
import time

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE = os.path.join(REPO_ROOT, "plugins", "modules", "nccl_topology.py")
SIM = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim")
FIXTURES = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "topology")
H200 = os.path.join(FIXTURES, "h200-2026-11-29")


@pytest.fixture
def lab_sysfs(tmp_path):
    root = tmp_path / "sys"
    subprocess.run([sys.executable, os.path.join(SIM, "make-sysfs.py"), str(root)], check=True)
    return str(root)


@pytest.fixture
def empty_sysfs(tmp_path):
    root = tmp_path / "sys0"
    subprocess.run([sys.executable, os.path.join(SIM, "make-sysfs.py"), str(root), "--gpus", "0"], check=True)
    return str(root)


def fake_nvidia_smi(tmp_path, output, rc):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\ncat <<'EOF'\n%sEOF\nexit %d\n" % (output, rc))
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("check_mode", [False, True])
def test_lab_node_reads_as_the_seed_machine(lab_sysfs, check_mode, run_module):
    result = run_module(nvidia_smi=os.path.join(SIM, "nvidia-smi"), sysfs_root=lab_sysfs,
                        _ansible_check_mode=check_mode)
    assert not result.get("failed") and result["changed"] is False
    facts = result["ansible_facts"]["nccl_topology"]
    assert facts["gpu_count"] == 8 and facts["weakest_link"] == "PHB"
    assert facts["all_pairs_p2p"] is False and facts["allreduce_fusion_advised"] is False
    assert facts["recommended_sglang_args"] == {"disable-custom-all-reduce": True}
    assert facts["recommended_env"] == {"NCCL_IB_DISABLE": "1"}
    assert facts["sources"]["topo_matrix"] == "nvidia-smi topo -m" and facts["sources"]["sysfs"] == lab_sysfs
    assert facts["gpus"][3]["pci_bus_id"] == "0000:04:00.0" and facts["gpus"][3]["compute_capability"] == "12.0"
    assert facts["warnings"] == []


def test_support_bundle_from_the_h200_is_read_offline(run_module):
    result = run_module(topo_matrix_file=os.path.join(H200, "topo_m.txt"),
                        p2p_read_file=os.path.join(H200, "topo_p2p_r.txt"),
                        query_gpu_file=os.path.join(H200, "query_all_nounits.txt"),
                        nccl_xml_file=os.path.join(H200, "nccl_topo.xml"))
    facts = result["ansible_facts"]["nccl_topology"]
    assert facts["gpu_count"] == 1 and facts["gpus"][0]["memory_mib"] == 143771
    assert facts["sources"]["sysfs"] is None and facts["sources"]["p2p_write"] is None
    assert facts["p2p_write"] is None and facts["p2p_read"] == [["X"]]


def test_before_the_driver_links_come_from_the_pci_tree(tmp_path, lab_sysfs, run_module):
    result = run_module(nvidia_smi=str(tmp_path / "absent" / "nvidia-smi"), sysfs_root=lab_sysfs)
    facts = result["ansible_facts"]["nccl_topology"]
    assert facts["gpu_count"] == 8 and facts["links_from"] == "sysfs"
    assert facts["weakest_link"] == "PHB" and facts["all_pairs_p2p"] is None
    assert facts["allreduce_fusion_advised"] is False
    assert any("not found" in warning for warning in facts["warnings"])


def test_no_nvidia_smi_and_no_gpu_on_the_bus_fails_naming_what_was_looked_for(empty_sysfs, run_module):
    result = run_module(nvidia_smi="nvidia-smi-absent-here", sysfs_root=empty_sysfs)
    assert result["failed"]
    assert "nvidia-smi-absent-here" in result["msg"] and "0x10de" in result["msg"] and empty_sysfs in result["msg"]


def test_driver_not_loaded_fails_with_its_message_rc_and_the_pci_view(tmp_path, lab_sysfs, run_module):
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    result = run_module(nvidia_smi=fake_nvidia_smi(tmp_path, message, 9), sysfs_root=lab_sysfs)
    assert result["failed"] and result["rc"] == 9
    assert "couldn't communicate with the NVIDIA driver" in result["msg"]
    assert len(result["sysfs_gpus"]) == 8


def test_corrupted_saved_matrix_fails_naming_the_row(tmp_path, run_module):
    with open(os.path.join(H200, "topo_m.txt")) as handle:
        text = handle.read().replace("GPU0\t X ", "GPU0\t Y ")
    damaged = tmp_path / "topo.txt"
    damaged.write_text(text)
    result = run_module(topo_matrix_file=str(damaged))
    assert result["failed"] and "row 'GPU0" in result["msg"] and str(damaged) in result["msg"]


def test_garbage_from_nvidia_smi_fails_with_its_output(tmp_path, lab_sysfs, run_module):
    result = run_module(nvidia_smi=fake_nvidia_smi(tmp_path, "Segmentation fault\n", 0),
                        sysfs_root=lab_sysfs)
    assert result["failed"] and "query-gpu" in result["msg"] and result["stdout"].startswith("Segmentation")


def test_missing_file_fails_clearly(tmp_path, run_module):
    result = run_module(nccl_xml_file=str(tmp_path / "nope.xml"))
    assert result["failed"] and "nccl_xml_file" in result["msg"] and "nope.xml" in result["msg"]


def test_unreadable_sysfs_root_given_explicitly_fails(tmp_path, run_module):
    result = run_module(sysfs_root=str(tmp_path / "nothing"), run_commands=False)
    assert result["failed"] and "does not exist" in result["msg"] and "sysfs_root" in result["msg"]


def test_the_verdict_names_the_switch_of_the_sglang_in_the_venv(sglang_venv, lab_sysfs, run_module):
    result = run_module(nvidia_smi=os.path.join(SIM, "nvidia-smi"), sysfs_root=lab_sysfs,
                        sglang_venv=sglang_venv("0.5.23"))
    facts = result["ansible_facts"]["nccl_topology"]
    assert facts["allreduce_fusion_flags"]["off"] == "--enforce-disable-flashinfer-allreduce-fusion"
    assert facts["warnings"] == []


def test_a_venv_without_sglang_is_a_warning_not_a_failure(tmp_path, lab_sysfs, run_module):
    result = run_module(nvidia_smi=os.path.join(SIM, "nvidia-smi"), sysfs_root=lab_sysfs,
                        sglang_venv=str(tmp_path / "empty-venv"))
    facts = result["ansible_facts"]["nccl_topology"]
    assert not result.get("failed") and facts["allreduce_fusion_flags"] is None
    assert facts["warnings"] == ["the SGLang options in %s were not read (SGLang is not installed in %s): the fusion "
                                 "verdict names no switch" % (tmp_path / "empty-venv", tmp_path / "empty-venv")]


def test_an_nvidia_smi_call_that_never_answers_fails_within_the_timeout_naming_it(tmp_path, lab_sysfs, run_module):
    """The lab's nvidia-smi, except that `topo -p2p w` hangs as on a GPU that fell off the bus."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!%s\nimport os, sys, time\nif sys.argv[1:] == ['topo', '-p2p', 'w']:\n    time.sleep(600)\n"
                      "os.execv(sys.executable, [sys.executable, %r] + sys.argv[1:])\n"
                      % (sys.executable, os.path.join(SIM, "nvidia-smi")))
    script.chmod(0o755)
    started = time.time()
    result = run_module(nvidia_smi=str(script), sysfs_root=lab_sysfs, timeout=2)
    assert time.time() - started < 30
    assert result["failed"] and result["nvidia_smi_timeout"] is True
    assert result["msg"].startswith("`%s topo -p2p w` did not answer within 2 s. The NVIDIA driver is stuck" % script)
    assert result["cmd"] == [str(script), "topo", "-p2p", "w"] and len(result["sysfs_gpus"]) == 8


def test_a_timeout_below_one_second_is_refused(run_module):
    result = run_module(topo_matrix_file=os.path.join(H200, "topo_m.txt"), timeout=0)
    assert result["failed"] and "timeout must be 1 or more seconds, got 0" in result["msg"]
