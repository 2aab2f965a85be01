# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The proxmox_gpu_vm module as Ansible runs it, against the lab's qm stand-in and host sysfs."""

import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE = os.path.join(REPO_ROOT, "plugins", "modules", "proxmox_gpu_vm.py")
SIM = os.path.join(REPO_ROOT, "molecule", "resources", "lab", "sim")
QM = os.path.join(SIM, "qm")

CONF = """#GPU VM
cores: 32
cpu: x86-64-v2-AES
memory: 262144
name: gpu-node

[fresh-install]
cores: 32
snaptime: 1764000100
"""
GPUS = [{"host": "0000:81:00.0"}, {"host": "0000:82:00.0"}]


@pytest.fixture
def pve(tmp_path, monkeypatch):
    conf_dir = tmp_path / "qemu-server"
    conf_dir.mkdir()
    (conf_dir / "100.conf").write_text(CONF)
    for name, args in (("sys", []), ("sys-noiommu", ["--no-iommu"])):
        subprocess.run([sys.executable, os.path.join(SIM, "make-host-sysfs.py"), str(tmp_path / name), "--gpus", "2"]
                       + args, check=True)
    monkeypatch.setenv("INFEROPS_LAB_PVE_CONF_DIR", str(conf_dir))
    monkeypatch.setenv("INFEROPS_LAB_VM_HW_DIR", str(tmp_path / "hw"))
    monkeypatch.setenv("INFEROPS_LAB_PVE_SYSFS", str(tmp_path / "sys"))
    return tmp_path


def qm(*args):
    return subprocess.run([sys.executable, QM] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)


def conf_text(pve):
    return (pve / "qemu-server" / "100.conf").read_text()


def test_converge_on_a_running_vm_is_pending_then_a_no_op(pve, run_module):
    assert qm("start", "100").returncode == 0
    result = run_module(vmid=100, gpus=GPUS, clique=0, qm=QM, sysfs_root=str(pve / "sys"))
    assert result["changed"] and result["running"] and result["restart_needed"]
    assert result["restart_keys"] == ["args", "cpu", "hostpci0", "hostpci1", "machine"]
    text = conf_text(pve)
    # Running: the change waits in [PENDING]; the snapshot section is kept.
    assert "[PENDING]\nargs: -set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1" in text
    assert text.index("[PENDING]") < text.index("[fresh-install]")
    again = run_module(vmid=100, gpus=GPUS, clique=0, qm=QM, sysfs_root=str(pve / "sys"))
    assert not again["changed"] and again["restart_needed"]
    assert qm("stop", "100").returncode == 0 and qm("start", "100").returncode == 0
    after_start = run_module(vmid=100, gpus=GPUS, clique=0, qm=QM, sysfs_root=str(pve / "sys"))
    assert not after_start["changed"] and not after_start["restart_needed"]
    assert "[PENDING]" not in conf_text(pve)


def test_check_mode_reports_and_writes_nothing(pve, run_module):
    result = run_module(vmid=100, gpus=GPUS, clique=2, qm=QM, sysfs_root=str(pve / "sys"), _ansible_check_mode=True,
                        _ansible_diff=True)
    assert result["changed"] and result["qm_set"][:3] == [QM, "set", "100"]
    assert "x-nv-gpudirect-clique=2" in result["diff"]["after"]
    assert conf_text(pve) == CONF


def test_preflight_refuses_before_writing(pve, run_module):
    result = run_module(vmid=100, gpus=GPUS, clique=0, qm=QM, sysfs_root=str(pve / "sys-noiommu"))
    assert result["failed"] and "nothing was changed" in result["msg"]
    assert result["problems"][0].startswith("IOMMU not present")
    assert conf_text(pve) == CONF


def test_hidden_cpu_in_the_vm_is_refused(pve, run_module):
    assert qm("set", "100", "--cpu", "host,hidden=1").returncode == 0
    before = conf_text(pve)
    result = run_module(vmid=100, gpus=GPUS, clique=0, qm=QM, sysfs_root=str(pve / "sys"))
    assert result["failed"] and "VM 100 has 'cpu: host,hidden=1', which makes QEMU add kvm=off" in result["msg"]
    assert conf_text(pve) == before


def test_unknown_vm_shows_qm_error(pve, run_module):
    result = run_module(vmid=404, gpus=GPUS, qm=QM, sysfs_root=str(pve / "sys"))
    assert result["failed"] and result["rc"] == 255
    assert "qemu-server/404.conf' does not exist" in result["msg"]


def test_qm_stand_in_behaves_like_qm(pve):
    assert qm("status", "100").stdout == "status: stopped\n"
    assert qm("shutdown", "100").stderr == "VM 100 not running\n"
    bad = qm("set", "100", "--hostpcix", "1")
    assert bad.returncode == 255 and bad.stderr.startswith("400 Parameter verification failed.\nhostpcix: property")
    assert qm("set", "100", "--hostpci0", "0000:81:00.0,pcie=1").returncode == 0
    start = qm("start", "100")
    assert start.returncode == 255 and start.stderr == "q35 machine model is not enabled\n"
    assert qm("set", "100", "--machine", "q35").returncode == 0 and qm("start", "100").returncode == 0
    assert qm("start", "100").stderr == "VM 100 already running\n"
    assert qm("set", "100", "--delete", "hostpci0").returncode == 0
    assert "[PENDING]\ndelete: hostpci0\n" in conf_text(pve)
    assert "hostpci0" not in qm("config", "100").stdout
    assert "hostpci0: 0000:81:00.0,pcie=1" in qm("config", "100", "--current", "1").stdout
    assert qm("set", "100", "--hostpci0", "0000:81:00.0,pcie=1").returncode == 0
    assert "[PENDING]" not in conf_text(pve)
