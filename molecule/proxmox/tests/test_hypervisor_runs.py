# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hypervisor side as an operator runs it, read as data (the JSON callback), not as printed lines.

Every test takes the host fixture: pytest groups the tests by that fixture, and one without it
would run after the others, out of the story's order.

Each test is the command an operator types against the scenario's inventory, in file order: check
mode, the preflight refusals, the node lock and the drain that stop a run before anything restarts,
the P2P experiment kept, then rolled back on wrong sums, and a power cycle that clears a GPU fault.
test_proxmox.py (after this file) reads the state they leave.
"""

import json
import os

import pytest
import testinfra

from ansible_collections.inferops.serving.tests.utils.playbook import run_scenario_playbook

testinfra_hosts = ["lab-proxmox-pve"]

GUEST = "lab-proxmox-guest"
CONF = "/etc/pve/qemu-server/100.conf"
VM_STATE = "cat /var/lib/inferops-lab/vm-hw/100.boot_id /var/lib/inferops-lab/vm-hw/100.json"
GUEST_LOCK = "/var/lib/inferops-serving/node.lock"
# A router that does not answer: the drain fails, and shows where it comes in the run.
DEAD_ROUTER = ["-e", "serving_router_group=proxmox_hosts", "-e", "serving_router_url=http://127.0.0.1:9"]
P2P_EXPERIMENT = ["playbooks/proxmox_p2p.yml", "-l", GUEST]
VM_RESTART_FOR_CLIQUE_3 = ["playbooks/proxmox_gpu_vm.yml", "-e", "proxmox_gpu_vm_clique=3", "-e", "proxmox_gpu_vm_reboot=true"]


@pytest.fixture(scope="module")
def guest():
    # Through Ansible, as the scenario's tests reach every node: host.ansible runs modules there.
    return testinfra.get_host("ansible://%s?ansible_inventory=%s" % (GUEST, os.environ["MOLECULE_INVENTORY_FILE"]))


def conf_sum(host):
    return host.check_output("sha1sum %s" % CONF)


def ran(run, prefix):
    """Whether a task whose name starts with PREFIX ran (was not skipped)."""
    return any(not result.get("skipped") for result in run.results_named(prefix))


def first_index(names, prefix):
    return next(index for index, name in enumerate(names) if name.startswith(prefix))


def test_check_mode_says_what_would_change_and_writes_nothing(host):
    before = conf_sum(host)
    run = run_scenario_playbook("playbooks/proxmox_gpu_vm.yml", "--check", "--diff", "-e", json.dumps({"proxmox_gpu_vm_clique": 3}))
    assert run.returncode == 0, run.summary
    assert run.recap["lab-proxmox-pve"].changed == 1, run.summary
    set_vm = [result for _host, _name, task in run.results for result in [task] + task.get("results", []) if "qm_set" in result]
    assert len(set_vm) == 1 and set_vm[0]["changed"], run.summary
    assert "args: -set device.hostpci0.x-nv-gpudirect-clique=3 -set device.hostpci1.x-nv-gpudirect-clique=3" in (
        set_vm[0]["diff"]["after"]), set_vm[0]["diff"]
    assert conf_sum(host) == before


@pytest.mark.parametrize("sysfs_root, words", [
    ("/opt/inferops-lab/pve-sys-noiommu", ["IOMMU not present: /sys/class/iommu is empty", "intel_iommu=on iommu=pt"]),
    ("/opt/inferops-lab/pve-sys-nvidia", ["GPU 0000:81:00.0 is bound to nvidia, not vfio-pci", "options vfio-pci ids=10de:2bb5",
                                          "IOMMU group 10 of GPU 0000:81:00.0 also holds 0000:81:00.1 (driver snd_hda_intel)"]),
], ids=["no-iommu", "gpus-on-nvidia"])
def test_a_preflight_refusal_says_what_to_change_and_changes_nothing(host, sysfs_root, words):
    before = conf_sum(host)
    run = run_scenario_playbook("playbooks/proxmox_gpu_vm.yml", "-e", "proxmox_gpu_vm_sysfs_root=" + sysfs_root)
    assert run.returncode != 0, run.summary
    for said in words + ["nothing was changed"]:
        assert run.said(said), (said, run.summary)
    assert conf_sum(host) == before


def test_a_vm_that_hides_the_hypervisor_is_refused(host):
    host.check_output("qm set 100 --cpu host,hidden=1")
    try:
        before = conf_sum(host)
        run = run_scenario_playbook("playbooks/proxmox_gpu_vm.yml")
        assert run.returncode != 0, run.summary
        for said in ["VM 100 has 'cpu: host,hidden=1', which makes QEMU add kvm=off", "remove hidden=1", "nothing was changed"]:
            assert run.said(said), (said, run.summary)
        assert conf_sum(host) == before
    finally:
        host.check_output("qm set 100 --cpu host")


@pytest.fixture(scope="module")
def held_and_undrained(host, guest):
    """The P2P experiment and a VM restart for a pending clique, first while another run holds the
    VM's node lock, then behind a router that does not answer; the VM's state before and after."""
    vm_before = host.check_output(VM_STATE)
    guest.check_output(
        "install -d %s && printf '%%s' %s > %s", os.path.dirname(GUEST_LOCK), json.dumps({
            "run_id": "ops-9:4242:1", "controller": "ops-9", "user": "alice", "pid": 4242, "playbook": "deploy.yml",
            "purpose": "deploy", "since": "2026-02-19T13:53:43Z", "epoch": 1771509223.0,
            "boot_id": guest.check_output("cat /proc/sys/kernel/random/boot_id")}), GUEST_LOCK)
    locked = [run_scenario_playbook(*P2P_EXPERIMENT), run_scenario_playbook(*VM_RESTART_FOR_CLIQUE_3)]
    # The other run ends; the node gets a deploy whose server a router would list.
    guest.check_output("rm %s", GUEST_LOCK)
    record = guest.ansible("inferops.serving.history", json.dumps({
        "path": "/var/lib/sglang/history.jsonl", "event": "deploy", "node": GUEST,
        "fields": {"server": {"url": "http://127.0.0.1:8000"}}, "owner": "sglang", "group": "sglang", "mode": "0640"}),
        check=False)
    assert record["changed"], record
    undrained = [run_scenario_playbook(*(P2P_EXPERIMENT + DEAD_ROUTER)), run_scenario_playbook(*(VM_RESTART_FOR_CLIQUE_3 + DEAD_ROUTER))]
    return {"locked": locked, "undrained": undrained, "vm_before": vm_before, "vm_after": host.check_output(VM_STATE),
            "lock_left": guest.run("test -e %s", GUEST_LOCK).rc == 0, "pending": host.check_output("qm pending 100")}


def test_a_held_node_lock_refuses_both_runs_naming_its_holder(held_and_undrained):
    experiment, restart = held_and_undrained["locked"]
    for run in (experiment, restart):
        assert run.returncode != 0 and run.said("locked by another run: alice@ops-9 (pid 4242, deploy.yml, deploy)"), run.summary
    # The experiment touched no GPU before the lock; the restart's play asked the host only under it.
    assert not ran(experiment, "Check the all-reduce before the change"), experiment.summary
    assert sum(name.startswith("Preflight the host and set the GPU passthrough of VM") for name in restart.task_names()) == 1


def test_a_router_that_does_not_answer_stops_both_runs_at_the_drain(held_and_undrained):
    experiment, restart = held_and_undrained["undrained"]
    for run in (experiment, restart):
        assert run.returncode != 0 and run.said("The router at http://127.0.0.1:9 does not answer"), run.summary
    experiment_tasks = experiment.task_names(GUEST)
    assert not any(name.startswith("Check the all-reduce before the change") for name in experiment_tasks)
    assert first_index(experiment_tasks, "Take the node lock") < first_index(experiment_tasks, "Take the node out of the router")
    # The restart takes the lock, asks the host, then drains; it goes no further than the drain.
    names = restart.task_names()
    preflight = max(index for index, name in enumerate(names) if name.startswith("Preflight the host and set the GPU passthrough"))
    assert first_index(names, "Take the node lock") < preflight < first_index(names, "Take the node out of the router")


def test_no_run_stopped_by_the_lock_or_the_drain_restarted_the_vm(held_and_undrained):
    for run in held_and_undrained["locked"] + held_and_undrained["undrained"]:
        assert not ran(run, "Restart the VM through its host") and not ran(run, "Shut down VM"), run.summary
    # The VM kept its boot and hardware; the lock was released; the clique asked for waits, pending.
    assert held_and_undrained["vm_after"] == held_and_undrained["vm_before"]
    assert not held_and_undrained["lock_left"]
    assert "x-nv-gpudirect-clique=3" in held_and_undrained["pending"]


def test_the_p2p_experiment_is_kept_and_the_topology_allows_custom_allreduce(host):  # pylint: disable=unused-argument
    run = run_scenario_playbook(*P2P_EXPERIMENT)
    assert run.returncode == 0, run.summary
    assert run.said("Kept gpu_p2p_clique on VM 100 (lab-proxmox-pve): every sum right and P2P on every pair"), run.summary
    assert run.said("SGLang flags the topology now calls for: {} (before: {'disable-custom-all-reduce': True})"), run.summary
    assert run.said("'NCCL_P2P_LEVEL': 'SYS'"), run.summary


def test_the_vm_goes_back_to_the_inventory_and_restarts(host):  # pylint: disable=unused-argument
    run = run_scenario_playbook("playbooks/proxmox_gpu_vm.yml", "-e", "proxmox_gpu_vm_reboot=true")
    assert run.returncode == 0, run.summary
    assert ran(run, "Start VM"), run.summary


def test_p2p_that_returns_wrong_sums_is_rolled_back_and_the_last_words_say_why(host):
    host.check_output("echo wrong_sums > /etc/inferops-lab/p2p-fault")
    run = run_scenario_playbook(*P2P_EXPERIMENT)
    assert run.returncode != 0, run.summary
    for said in ["Rolled back gpu_p2p_clique on VM 100: the all-reduce returned wrong sums",
                 "first: element 0 on rank 0, got 1.0, expected 3.0", "P2P access matrix: [[true, true], [true, true]]"]:
        assert run.said(said), (said, run.summary)
    assert not run.said("Kept gpu_p2p_clique"), run.summary
    assert ran(run, "Restore the host settings of the inventory") and ran(run, "Start VM"), run.summary
    # The last words, after the lock's release: what was rolled back, where, what to change.
    last = run.closing_message()
    assert first_index(run.task_names(), "Release the node lock") < len(run.task_names()) - 1
    assert ("Host experiment gpu_p2p_clique rolled back (VM 100 on lab-proxmox-pve) on lab-proxmox-guest:"
            " the all-reduce returned wrong sums") in last, last
    assert "What to change: nothing: the host is back on the inventory's passthrough" in last, last


def test_a_power_cycle_clears_a_gpu_fault_that_needs_a_reset(host, guest):
    """The gate refuses the node; the power cycle it asks for (node lock, drain, qm shutdown
    --forceStop, qm start, from the VM's side) clears it."""
    # Tied to this start of the VM, as the lab's nvidia-smi reads it: the next start clears it.
    boot_id = host.check_output("cat /var/lib/inferops-lab/vm-hw/100.boot_id")
    guest.check_output("printf '%%s' %s > /run/inferops-lab/gpu-faults.json",
                       json.dumps({"vm_boot_id": boot_id, "0": {"recovery_action": "Reset"}}))
    verdict = guest.ansible("inferops.serving.gpu_health", "kernel_log_file=/run/inferops-lab/kernel.log", check=False)
    assert verdict["healthy"] is False and "recovery action 'Reset'" in json.dumps(verdict), verdict
    boot_before = host.check_output(VM_STATE).split("\n")[0]
    run = run_scenario_playbook("playbooks/proxmox_gpu_vm.yml", "-e", "proxmox_gpu_vm_power_cycle=true")
    assert run.returncode == 0, run.summary
    names = run.task_names()
    # Nothing waited in the passthrough: the VM restarted for the power cycle alone.
    assert first_index(names, "Take the node lock") < first_index(names, "Shut down VM"), names
    assert ran(run, "Start VM"), run.summary
    assert host.check_output(VM_STATE).split("\n")[0] != boot_before
    verdict = guest.ansible("inferops.serving.gpu_health", "kernel_log_file=/run/inferops-lab/kernel.log", check=False)
    assert verdict["healthy"] is True, verdict


def test_a_restart_switch_that_is_not_a_boolean_is_refused_before_the_vm_restarts(host, tmp_path):
    """Read as Jinja's bool, "maybe" would mean false: the VM would go on without the restart it
    was asked for, and nothing would say so."""
    typo = tmp_path / "typo.yml"
    typo.write_text(json.dumps({"all": {"hosts": {GUEST: {"proxmox_gpu_vm_power_cycle": "maybe"}}}}))
    boot_before = host.check_output(VM_STATE).split("\n")[0]
    run = run_scenario_playbook("-i", str(typo), "playbooks/proxmox_gpu_vm.yml")
    assert run.returncode != 0 and run.recap[GUEST].failed == 1, run.summary
    assert any("proxmox_gpu_vm_power_cycle must be true or false, got the text 'maybe'" in message
               and "Set on the VM %s (its variables or the command line): change it to true or false." % GUEST in message
               for message in run.failures(GUEST)), run.summary
    assert not ran(run, "Take the node lock") and not ran(run, "Shut down VM"), run.summary
    assert host.check_output(VM_STATE).split("\n")[0] == boot_before
