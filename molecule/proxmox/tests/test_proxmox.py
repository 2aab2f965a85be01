# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After the kept and the rolled-back P2P experiment: the VM is the inventory's, the history tells both."""

import json

import pytest

testinfra_hosts = ["lab-proxmox-pve", "lab-proxmox-guest"]

HISTORY = "/var/lib/sglang/history.jsonl"
CONF = "/etc/pve/qemu-server/100.conf"


@pytest.fixture
def pve(host):
    if host.backend.get_hostname() != "lab-proxmox-pve":
        pytest.skip("Proxmox host only")
    return host


@pytest.fixture
def guest(host):
    if host.backend.get_hostname() != "lab-proxmox-guest":
        pytest.skip("guest only")
    return host


def test_vm_config_is_the_inventory_passthrough_without_clique(pve):
    text = pve.file(CONF).content_string
    lines = text.split("\n[", 1)[0].splitlines()
    assert "hostpci0: 0000:81:00.0,pcie=1" in lines
    assert "hostpci1: 0000:82:00.0,pcie=1" in lines
    assert "machine: q35" in lines and "cpu: host" in lines
    assert not any(line.startswith("args:") for line in lines), text
    # Nothing left pending after the last restart; Proxmox's own parts of the file kept.
    assert "[PENDING]" not in text
    assert lines[0] == "#GPU VM for SGLang"
    assert "\n[fresh-install]\n" in text and "snaptime: 1764000100" in text
    assert pve.check_output("qm status 100") == "status: running"


def test_running_vm_has_its_gpus_without_clique(pve):
    hardware = json.loads(pve.file("/var/lib/inferops-lab/vm-hw/100.json").content_string)
    assert [gpu["host"] for gpu in hardware["gpus"]] == ["0000:81:00.0", "0000:82:00.0"]
    assert [gpu["clique"] for gpu in hardware["gpus"]] == [None, None]
    assert hardware["kvm_hidden"] is False


def test_guest_sees_two_gpus_without_p2p(guest):
    out = guest.check_output("nvidia-smi topo -p2p r")
    assert " GPU0\tX\tNS\t" in out and " GPU1\tNS\tX\t" in out


def test_history_shows_kept_then_rolled_back(guest):
    records = [json.loads(line) for line in guest.file(HISTORY).content_string.splitlines()]
    experiments = [r for r in records if r["event"] == "experiment"]
    assert [(r["experiment"], r["outcome"]) for r in experiments] == [
        ("gpu_p2p_clique", "kept"), ("gpu_p2p_clique", "rolled_back")]
    kept, rolled_back = experiments
    assert kept["layer"] == "host" and kept["vmid"] == 100 and kept["host"] == "lab-proxmox-pve"
    assert all(row["correct"] for row in kept["allreduce_after"])
    assert "wrong sums" in rolled_back["message"]
    rollbacks = [r for r in records if r["event"] == "rollback"]
    assert len(rollbacks) == 1 and rollbacks[0]["experiment"] == "gpu_p2p_clique"
    assert rollbacks[0]["recovery_s"] >= 0
    assert any("P2P access matrix" in line for line in rollbacks[0]["evidence"])
    assert guest.file(HISTORY).user == "sglang" and guest.file(HISTORY).mode == 0o640
