# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_allreduce_check as Ansible runs it, its real job file run by the lab's torch stand-in."""

import json
import os
import sys

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE = os.path.join(REPO_ROOT, "plugins", "modules", "nccl_allreduce_check.py")
TORCH_PYTHON = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim", "torch-python")


@pytest.fixture
def vm(tmp_path, monkeypatch):
    """Write the VM hardware the lab's qm would write; return a function to change it."""
    path = tmp_path / "100.json"
    monkeypatch.setenv("INFEROPS_LAB_VM_HW", str(path))

    def write(clique=None, fault=None, gpus=2):
        path.write_text(json.dumps({"status": "running", "kvm_hidden": False, "p2p_fault": fault,
                                    "gpus": [{"hostpci": "hostpci%d" % i, "clique": clique} for i in range(gpus)]}))
    return write


def test_without_p2p_the_check_passes_over_shm(vm, run_module):
    vm()
    result = run_module(python=TORCH_PYTHON, sizes=[4096, 1048576])
    facts = result["ansible_facts"]["nccl_allreduce_check"]
    assert not result.get("failed") and facts["ok"] and facts["p2p_all_pairs"] is False
    assert facts["transports"] == ["SHM"] and [r["bytes"] for r in facts["results"]] == [4096, 1048576]


def test_wrong_sums_fail_or_report(vm, run_module):
    vm(clique=0, fault="wrong_sums")
    failed = run_module(python=TORCH_PYTHON)
    assert failed["failed"] and "returned wrong sums" in failed["msg"]
    reported = run_module(python=TORCH_PYTHON, fail_on_error=False)
    facts = reported["ansible_facts"]["nccl_allreduce_check"]
    assert not reported.get("failed") and reported["job_rc"] == 0
    assert not facts["ok"] and facts["failure"]["kind"] == "wrong_result" and facts["p2p_all_pairs"]


def test_hang_is_cut_at_the_timeout(vm, run_module):
    vm(clique=0, fault="hang")
    result = run_module(python=TORCH_PYTHON, timeout=2, fail_on_error=False)
    facts = result["ansible_facts"]["nccl_allreduce_check"]
    assert facts["timed_out"] and facts["failure"]["kind"] == "timeout" and not facts["ok"]


@pytest.mark.parametrize("args, words", [
    ({"python": "/nonexistent/python"}, "python: /nonexistent/python is not an executable"),
    ({"python": sys.executable, "sizes": [2]}, "sizes must list byte counts of at least 4"),
    ({"python": sys.executable, "timeout": 0}, "timeout must be at least 1"),
    ({"python": sys.executable, "sizes": [4096], "inject_wrong": {"rank": 0, "index": 1024}},
     "inject_wrong.index is 1024 but the largest size holds 1024 float32 elements"),
    ({"python": sys.executable, "inject_wrong": {"rank": -1, "index": 0}}, "must not be negative"),
    ({"python": sys.executable, "inject_wrong": {"rank": 0}}, "missing required arguments: index"),
])
def test_bad_arguments_name_the_option(args, words, run_module):
    result = run_module(**args)
    assert result["failed"] and words in result["msg"]


def test_too_few_gpus_visible(vm, run_module):
    vm(gpus=1)
    result = run_module(python=TORCH_PYTHON, world_size=2)
    assert result["failed"] and "2 GPUs asked for, torch sees 1" in result["msg"]
