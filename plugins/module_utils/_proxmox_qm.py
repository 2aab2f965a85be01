# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox VE VM configuration: parse it, compute the GPU passthrough it should have, diff.

Formats as qemu-server writes and prints them (PVE/QemuServer.pm parse_vm_config and
write_vm_config, PVE/CLI/qm.pm `config`):

- `/etc/pve/qemu-server/<vmid>.conf`: the description as `#` lines on top, then one
  `key: value` line per option in sorted order; then optional sections `[PENDING]`
  (values set while the VM runs, and `delete: a,b`), `[special:cloudinit]`, and one
  `[snapname]` section per snapshot.
- `qm config <vmid>`: one `key: value` line per option, sorted, pending values applied
  (`--current 1` shows the running values instead), never the `digest`.
- Property strings such as `hostpci0: 0000:81:00.0,pcie=1` or `cpu: host,hidden=1`:
  comma separated, the first item may be the default key without `name=`.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re
import shlex

_KEY_RE = re.compile(r"^([a-z][a-z_\-]*\d*):\s*(.*?)\s*$")
_CLIQUE_RE = re.compile(r"^device\.(hostpci\d+)\.x-nv-gpudirect-clique=(\d+)$")
_BDF_RE = re.compile(r"^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?$")
_HOSTPCI_RE = re.compile(r"^hostpci(\d+)$")

# Options that only take effect when QEMU starts: a running VM keeps them pending.
COLD_OPTIONS = ("args", "machine", "cpu", "numa", "hugepages")
MAX_HOSTPCI = 16
CLIQUE_MAX = 15


class ProxmoxConfigError(Exception):
    """Configuration text or settings that cannot be used."""


def parse_qm_config(text):
    """Output of `qm config <vmid>`: {key: value}."""
    options = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _KEY_RE.match(line)
        if not match:
            raise ProxmoxConfigError("line %d of `qm config` is not a `key: value` line: %s" % (number, line))
        options[match.group(1)] = match.group(2)
    return options


def parse_property_string(value, default_key):
    """`0000:81:00.0,pcie=1` -> {'host': '0000:81:00.0', 'pcie': '1'}; keeps the order of the keys."""
    result = {}
    for index, item in enumerate(value.split(",")):
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            key, val = item.split("=", 1)
            result[key.strip()] = val.strip()
        elif index == 0 and default_key:
            result[default_key] = item
        else:
            raise ProxmoxConfigError("'%s' in '%s' has no name=" % (item, value))
    return result


def normalize_bdf(text):
    """`81:00.0` -> `0000:81:00.0`; a bus id without a function keeps none (`0000:81:00`)."""
    match = _BDF_RE.match(text.strip())
    if not match:
        raise ProxmoxConfigError("'%s' is not a PCI address (like 0000:81:00.0)" % text)
    domain, bus, device, function = match.groups()
    bdf = "%s:%s:%s" % ((domain or "0000").lower(), bus.lower(), device.lower())
    return bdf + "." + function if function is not None else bdf


def hostpci_devices(value):
    """Host devices (or the mapping) of one hostpciN value, with its options."""
    props = parse_property_string(value, "host")
    hosts = []
    if "host" in props:
        hosts = [normalize_bdf(item) for item in props["host"].split(";") if item.strip()]
    return {"hosts": hosts, "mapping": props.get("mapping"), "options": props}


def args_clique(args):
    """{hostpciN: clique} from an `args:` line, and the args that are not clique settings."""
    words = shlex.split(args or "")
    cliques = {}
    rest = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "-set" and index + 1 < len(words):
            match = _CLIQUE_RE.match(words[index + 1])
            if match:
                cliques[match.group(1)] = int(match.group(2))
                index += 2
                continue
        rest.append(word)
        index += 1
    return cliques, rest


def render_args(rest, cliques):
    """An args line: the user's own arguments first, then one -set per clique entry in hostpci order."""
    words = list(rest)
    for name in sorted(cliques, key=lambda key: int(_HOSTPCI_RE.match(key).group(1))):
        words += ["-set", "device.%s.x-nv-gpudirect-clique=%d" % (name, cliques[name])]
    return " ".join(shlex.quote(word) for word in words)


def hostpci_value(gpu):
    if gpu.get("mapping"):
        return "mapping=%s,pcie=1" % gpu["mapping"]
    return "%s,pcie=1" % normalize_bdf(gpu["host"])


def _same_hostpci(current, gpu):
    """Current value already passes this GPU, one function, as PCIe, without primary VGA."""
    if current is None:
        return False
    try:
        have = hostpci_devices(current)
    except ProxmoxConfigError:
        return False
    options = have["options"]
    if options.get("pcie") != "1" or options.get("x-vga") in ("1", "on", "yes"):
        return False
    if gpu.get("mapping"):
        return have["mapping"] == gpu["mapping"] and not have["hosts"]
    return have["hosts"] == [normalize_bdf(gpu["host"])] and not have["mapping"]


def validate_spec(spec):
    """Problems with the settings themselves, each naming the variable and what to change."""
    problems = []
    gpus = spec.get("gpus") or []
    if not gpus:
        problems.append("proxmox_gpu_vm_gpus is empty: list the GPUs to pass through, e.g. "
                        "[{host: '0000:81:00.0'}] or [{mapping: gpu0}]")
    if len(gpus) > MAX_HOSTPCI:
        problems.append("proxmox_gpu_vm_gpus lists %d GPUs; a VM takes at most %d hostpci devices"
                        % (len(gpus), MAX_HOSTPCI))
    seen = set()
    for index, gpu in enumerate(gpus):
        if not isinstance(gpu, dict) or bool(gpu.get("host")) == bool(gpu.get("mapping")):
            problems.append("proxmox_gpu_vm_gpus[%d] must have exactly one of host (a PCI address with its "
                            "function, like 0000:81:00.0) or mapping (a cluster resource mapping)" % index)
            continue
        if gpu.get("host"):
            try:
                bdf = normalize_bdf(str(gpu["host"]))
            except ProxmoxConfigError as exc:
                problems.append("proxmox_gpu_vm_gpus[%d].host: %s" % (index, exc))
                continue
            if not re.search(r"\.[0-7]$", bdf):
                problems.append("proxmox_gpu_vm_gpus[%d].host is %s: give the function (%s.0); without it Proxmox "
                                "passes every function as hostpci%d.0, hostpci%d.1 and QEMU's -set cannot address "
                                "the dotted id, so the clique could not be set" % (index, bdf, bdf, index, index))
            key = bdf
        else:
            key = "mapping:" + str(gpu["mapping"])
        if key in seen:
            problems.append("proxmox_gpu_vm_gpus[%d] repeats %s" % (index, key))
        seen.add(key)
    clique = spec.get("clique")
    if clique is not None and not 0 <= int(clique) <= CLIQUE_MAX:
        problems.append("proxmox_gpu_vm_clique is %s: a clique id is 0 to %d, or null for none"
                        % (clique, CLIQUE_MAX))
    if re.search(r"(^|,)hidden=(1|on|yes)(,|$)", spec.get("cpu") or ""):
        problems.append("proxmox_gpu_vm_cpu is %s: hidden=1 makes QEMU add kvm=off, which silently disables the "
                        "GPU clique in the guest driver; use a plain CPU type such as host" % spec["cpu"])
    hugepages = spec.get("hugepages")
    if hugepages not in (None, "2", "1024", "any"):
        problems.append("proxmox_gpu_vm_hugepages is %s: use 2, 1024, any, or null to leave it alone" % hugepages)
    return problems


def desired_changes(options, spec):
    """What `qm set` must change so the VM passes the GPUs through as spec says.

    `options` is the VM's configuration with pending values applied (`qm config`).
    Returns (set, delete): {key: new value} and keys to delete. Other options, other
    hostpci entries and the user's own `args` are left as they are.
    """
    want = {}
    delete = []
    if spec.get("machine") and not _machine_ok(options.get("machine"), spec["machine"]):
        want["machine"] = spec["machine"]
    if spec.get("cpu"):
        cpu = parse_property_string(options["cpu"], "cputype") if options.get("cpu") else {}
        if cpu.get("cputype") != spec["cpu"] or cpu.get("hidden") in ("1", "on", "yes"):
            cpu.pop("hidden", None)
            cpu["cputype"] = spec["cpu"]
            want["cpu"] = ",".join([spec["cpu"]] + ["%s=%s" % (k, v) for k, v in cpu.items() if k != "cputype"])
    for index, gpu in enumerate(spec["gpus"]):
        key = "hostpci%d" % index
        if not _same_hostpci(options.get(key), gpu):
            want[key] = hostpci_value(gpu)
    if spec.get("numa") is not None:
        value = "1" if spec["numa"] else "0"
        if options.get("numa", "0") != value:
            want["numa"] = value
    if spec.get("hugepages") is not None and options.get("hugepages") != spec["hugepages"]:
        want["hugepages"] = spec["hugepages"]

    cliques, rest = args_clique(options.get("args"))
    clique = spec.get("clique")
    managed = ["hostpci%d" % index for index in range(len(spec["gpus"]))]
    new_cliques = {key: value for key, value in cliques.items() if key not in managed}
    if clique is not None:
        new_cliques.update((key, int(clique)) for key in managed)
    if new_cliques != cliques:
        args = render_args(rest, new_cliques)
        if args:
            want["args"] = args
        else:
            delete.append("args")
    return want, delete


def _machine_ok(current, wanted):
    # `pc-q35-9.2` pins a q35 version: it is q35 all the same.
    if current is None:
        return False
    machine = parse_property_string(current, "type").get("type", "")
    return machine == wanted or (wanted == "q35" and re.match(r"^pc-q35-\d", machine) is not None)


def apply_changes(options, want, delete):
    after = dict(options)
    for key in delete:
        after.pop(key, None)
    after.update(want)
    return after


def qm_set_argv(qm, vmid, want, delete):
    argv = [qm, "set", str(vmid)]
    for key in sorted(want):
        argv += ["--%s" % key, want[key]]
    if delete:
        argv += ["--delete", ",".join(sorted(delete))]
    return argv


def restart_needed(current, after):
    """Options a running VM only picks up at its next start, and whose running value differs."""
    keys = set(k for k in list(current) + list(after) if k in COLD_OPTIONS or _HOSTPCI_RE.match(k))
    return sorted(key for key in keys if current.get(key) != after.get(key))


def kvm_hiding(options):
    """Settings that make QEMU add kvm=off, which silently disables the clique in the guest driver."""
    found = []
    if options.get("cpu"):
        try:
            cpu = parse_property_string(options["cpu"], "cputype")
        except ProxmoxConfigError:
            cpu = {}
        if cpu.get("hidden") in ("1", "on", "yes"):
            found.append(("cpu", options["cpu"], "remove hidden=1 from cpu (cpu: %s)" % cpu.get("cputype", "host")))
    for key in sorted(options):
        match = _HOSTPCI_RE.match(key)
        if not match:
            continue
        try:
            props = parse_property_string(options[key], "host")
        except ProxmoxConfigError:
            continue
        if props.get("x-vga") in ("1", "on", "yes"):
            found.append((key, options[key], "drop x-vga=1 from %s (a compute GPU needs no primary VGA)" % key))
    if "kvm=off" in (options.get("args") or ""):
        found.append(("args", options["args"], "remove kvm=off from args"))
    return found
