# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox VM configuration: the file and `qm config` formats, the passthrough to set, the diff."""

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._proxmox_qm import (
    ProxmoxConfigError,
    args_clique,
    desired_changes,
    hostpci_devices,
    kvm_hiding,
    parse_qm_config,
    qm_set_argv,
    render_args,
    restart_needed,
    validate_spec,
)

SPEC = {"gpus": [{"host": "0000:81:00.0"}, {"host": "82:00.0"}], "clique": 0, "machine": "q35", "cpu": "host",
        "numa": None, "hugepages": None}


def test_qm_config_output_is_read_line_by_line():
    assert parse_qm_config("cores: 32\nname: gpu-node\n") == {"cores": "32", "name": "gpu-node"}
    with pytest.raises(ProxmoxConfigError, match="line 2"):
        parse_qm_config("cores: 32\nnot a line\n")


def test_user_args_survive_the_clique():
    cliques, rest = args_clique("-cpu host,+invtsc -set device.hostpci1.x-nv-gpudirect-clique=2 -set device.foo.x=1")
    assert cliques == {"hostpci1": 2}
    assert rest == ["-cpu", "host,+invtsc", "-set", "device.foo.x=1"]
    assert render_args(rest, {"hostpci10": 1, "hostpci2": 1}) == (
        "-cpu host,+invtsc -set device.foo.x=1 -set device.hostpci2.x-nv-gpudirect-clique=1 "
        "-set device.hostpci10.x-nv-gpudirect-clique=1")


def test_fresh_vm_gets_q35_host_cpu_pcie_functions_and_clique():
    want, delete = desired_changes({"cpu": "x86-64-v2-AES", "cores": "32"}, SPEC)
    assert delete == []
    assert want == {
        "machine": "q35", "cpu": "host",
        "hostpci0": "0000:81:00.0,pcie=1", "hostpci1": "0000:82:00.0,pcie=1",
        "args": "-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0",
    }
    assert qm_set_argv("qm", 100, want, delete)[:5] == ["qm", "set", "100", "--args", want["args"]]


def test_configured_vm_needs_nothing():
    options = {"machine": "pc-q35-9.2+pve1", "cpu": "host,flags=+pdpe1gb", "hostpci0": "host=81:00.0,pcie=1",
               "hostpci1": "0000:82:00.0,pcie=1,rombar=0",
               "args": "-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0"}
    assert desired_changes(options, SPEC) == ({}, [])


def test_clique_off_removes_only_the_managed_entries():
    options = {"machine": "q35", "cpu": "host", "hostpci0": "0000:81:00.0,pcie=1", "hostpci1": "0000:82:00.0,pcie=1",
               "args": "-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0"}
    assert desired_changes(options, dict(SPEC, clique=None)) == ({}, ["args"])
    options["args"] += " -no-hpet -set device.hostpci5.x-nv-gpudirect-clique=1"
    want, delete = desired_changes(options, dict(SPEC, clique=None))
    assert want == {"args": "-no-hpet -set device.hostpci5.x-nv-gpudirect-clique=1"} and delete == []


@pytest.mark.parametrize("current", [
    "0000:81:00",                      # every function: hostpci0.0, hostpci0.1, -set cannot address it
    "0000:81:00.0",                    # no pcie=1
    "0000:81:00.0,pcie=1,x-vga=1",     # primary VGA adds kvm=off
    "mapping=gpu0,pcie=1",             # another device
])
def test_hostpci_is_rewritten_when_it_is_not_the_gpu_as_pcie(current):
    want, _delete = desired_changes({"hostpci0": current}, dict(SPEC, gpus=[{"host": "0000:81:00.0"}], clique=None))
    assert want["hostpci0"] == "0000:81:00.0,pcie=1"


def test_mapping_entries():
    spec = dict(SPEC, gpus=[{"mapping": "gpu0"}, {"mapping": "gpu1"}], clique=None)
    want, _delete = desired_changes({"machine": "q35", "cpu": "host", "hostpci0": "mapping=gpu0,pcie=1"}, spec)
    assert want == {"hostpci1": "mapping=gpu1,pcie=1"}
    expected = {"hosts": [], "mapping": "gpu0", "options": {"mapping": "gpu0", "pcie": "1"}}
    assert hostpci_devices("mapping=gpu0,pcie=1") == expected


def test_numa_and_hugepages_only_when_asked():
    spec = dict(SPEC, gpus=[{"host": "0000:81:00.0"}], clique=None, numa=True, hugepages="1024")
    want, _delete = desired_changes({"machine": "q35", "cpu": "host", "numa": "0"}, spec)
    assert want == {"hostpci0": "0000:81:00.0,pcie=1", "numa": "1", "hugepages": "1024"}


@pytest.mark.parametrize("spec, words", [
    (dict(SPEC, gpus=[]), "proxmox_gpu_vm_gpus is empty"),
    (dict(SPEC, gpus=[{"host": "0000:81:00"}]), "give the function (0000:81:00.0)"),
    (dict(SPEC, gpus=[{"host": "0000:81:00.0", "mapping": "gpu0"}]), "exactly one of host"),
    (dict(SPEC, gpus=[{"host": "81:00.0"}, {"host": "0000:81:00.0"}]), "repeats 0000:81:00.0"),
    (dict(SPEC, gpus=[{"host": "zz"}]), "'zz' is not a PCI address"),
    (dict(SPEC, clique=16), "a clique id is 0 to 15"),
    (dict(SPEC, cpu="host,hidden=1"), "hidden=1 makes QEMU add kvm=off"),
    (dict(SPEC, hugepages="4"), "use 2, 1024, any"),
])
def test_bad_settings_name_the_variable(spec, words):
    assert any(words in problem for problem in validate_spec(spec))


def test_good_settings_pass():
    assert validate_spec(SPEC) == []


def test_kvm_off_sources_are_found():
    found = kvm_hiding({"cpu": "host,hidden=1", "hostpci0": "0000:81:00.0,pcie=1,x-vga=1", "args": "-cpu kvm=off"})
    assert [key for key, _value, _change in found] == ["cpu", "hostpci0", "args"]
    assert kvm_hiding({"cpu": "host", "hostpci0": "0000:81:00.0,pcie=1"}) == []


def test_restart_needed_lists_cold_options_that_differ():
    current = {"cpu": "x86-64-v2-AES", "cores": "32", "name": "a"}
    after = {"cpu": "host", "cores": "32", "name": "b", "hostpci0": "0000:81:00.0,pcie=1", "machine": "q35"}
    assert restart_needed(current, after) == ["cpu", "hostpci0", "machine"]
    assert restart_needed(after, after) == []
