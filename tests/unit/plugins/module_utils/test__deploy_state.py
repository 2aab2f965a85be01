# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy record and the plan that compares a node with it."""

import base64
import hashlib
import os

from ansible_collections.inferops.serving.plugins.module_utils import _deploy_state as ds

DPKG_STATUS = """Package: cuda-toolkit-12-8
Status: install ok installed
Priority: optional
Version: 12.8.1-1
Description: CUDA Toolkit 12.8
 meta-package

Package: nvidia-open
Status: hold ok installed
Version: 580.95.05-1

Package: nvidia-persistenced
Status: deinstall ok config-files
Version: 580.95.05-1
"""


def _record_line(relpath, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (relpath, digest, len(data))


def make_venv(root, files):
    """A venv with one distribution `demo-pkg` 1.2.3 whose RECORD lists ``files`` (relpath -> bytes)."""
    site = root / "venv" / "lib" / "python3.11" / "site-packages"
    info = site / "demo_pkg-1.2.3.dist-info"
    info.mkdir(parents=True)
    record = ""
    for relpath, data in files.items():
        path = site / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        record += _record_line(relpath, data)
    (info / "RECORD").write_text(record + "demo_pkg-1.2.3.dist-info/RECORD,,\n")
    return str(root / "venv"), str(site)


def node(tmp_path):
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nExecStart=/x\n")
    venv, site = make_venv(tmp_path, {"demo/__init__.py": b"x = 1\n", "demo/patched.py": b"fused = False\n"})
    spec = {"files": [str(unit), os.path.join(site, "demo/patched.py")], "packages": ["cuda-toolkit-12-8", "nvidia-open"],
            "venv": venv, "distributions": ["demo-pkg", "absent-pkg"], "service": "sglang.service"}
    texts = {"/var/lib/dpkg/status": DPKG_STATUS, "/proc/sys/kernel/random/boot_id": "boot-1\n"}
    services = {"sglang.service": "active"}
    return unit, site, spec, texts, services


def observe(spec, texts, services):
    return ds.observe(spec, texts.get, services.get)


def test_a_node_as_its_healthy_converge_left_it_is_current(tmp_path):
    _unit, _site, spec, texts, services = node(tmp_path)
    record = ds.new_record("fp-1", spec, observe(spec, texts, services))
    assert record["packages"] == {"cuda-toolkit-12-8": "12.8.1-1", "nvidia-open": "580.95.05-1 held"}
    assert record["distributions"] == {"demo-pkg": "1.2.3", "absent-pkg": None}
    again = observe(ds.record_spec(record), texts, services)
    assert ds.plan_state(record, "fp-1", again, True) == ("current", [])


def test_every_kind_of_drift_is_named(tmp_path):
    unit, site, spec, texts, services = node(tmp_path)
    record = ds.new_record("fp-1", spec, observe(spec, texts, services))
    unit.write_text("[Service]\nExecStart=/y\n")
    os.remove(os.path.join(site, "demo/__init__.py"))
    texts["/var/lib/dpkg/status"] = DPKG_STATUS.replace("hold ok installed", "install ok installed")
    texts["/proc/sys/kernel/random/boot_id"] = "boot-2\n"
    services["sglang.service"] = "failed"
    state, reasons = ds.plan_state(record, "fp-2", observe(ds.record_spec(record), texts, services), True)
    assert state == "changes"
    text = " | ".join(reasons)
    assert "the inputs differ" in text
    assert "the node restarted" in text
    assert "%s changed since the last deploy" % unit in text
    assert "package nvidia-open is 580.95.05-1, the last deploy left 580.95.05-1 held" in text
    assert "demo/__init__.py is missing" in text
    assert "sglang.service is failed, not active" in text


def test_a_patched_file_is_checked_by_checksum_not_against_pip_record(tmp_path):
    _unit, site, spec, texts, services = node(tmp_path)
    patched = os.path.join(site, "demo/patched.py")
    with open(patched, "w") as handle:
        handle.write("fused = True  # the experiment's patch\n")
    record = ds.new_record("fp-1", spec, observe(spec, texts, services))
    assert ds.plan_state(record, "fp-1", observe(ds.record_spec(record), texts, services), True)[0] == "current"
    with open(patched, "w") as handle:
        handle.write("fused = None\n")
    state, reasons = ds.plan_state(record, "fp-1", observe(ds.record_spec(record), texts, services), True)
    assert (state, reasons) == ("changes", ["%s changed since the last deploy" % patched])


def test_a_file_edited_to_another_size_drifts_from_pip_record(tmp_path):
    _unit, site, spec, texts, services = node(tmp_path)
    record = ds.new_record("fp-1", spec, observe(spec, texts, services))
    with open(os.path.join(site, "demo/__init__.py"), "w") as handle:
        handle.write("x = 12345\n")
    reasons = ds.plan_state(record, "fp-1", observe(ds.record_spec(record), texts, services), True)[1]
    assert reasons == ["%s has 10 bytes, pip wrote 6" % os.path.join(site, "demo/__init__.py")]


def test_another_version_in_the_venv_is_named(tmp_path):
    _unit, site, spec, texts, services = node(tmp_path)
    record = ds.new_record("fp-1", spec, observe(spec, texts, services))
    os.rename(os.path.join(site, "demo_pkg-1.2.3.dist-info"), os.path.join(site, "demo_pkg-1.2.4.dist-info"))
    reasons = ds.plan_state(record, "fp-1", observe(ds.record_spec(record), texts, services), True)[1]
    assert reasons == ["demo-pkg is 1.2.4 in %s, the last deploy left 1.2.3" % spec["venv"]]


def test_no_record_is_new_without_history_and_changes_with_it():
    assert ds.plan_state(None, "fp", None, False) == ("new", ["never deployed"])
    state, reasons = ds.plan_state(None, "fp", None, True)
    assert state == "changes" and "deployed before records were kept" in reasons[0]


def test_a_long_drift_list_is_cut_to_the_first_few(tmp_path):
    record = {"format": ds.RECORD_FORMAT, "fingerprint": "fp", "boot_id": "b",
              "files": dict(("/etc/f%d" % i, "0" * 64) for i in range(9))}
    observed = {"files": {}, "packages": {}, "distributions": {}, "service": None, "boot_id": "b"}
    reasons = ds.drift(record, "fp", observed)
    assert len(reasons) == ds.MAX_REASONS_PER_KIND + 1
    assert reasons[-1] == "and 4 more files"


def test_the_fingerprint_follows_values_and_code(tmp_path):
    (tmp_path / "roles" / "gpu_vm").mkdir(parents=True)
    (tmp_path / "plugins").mkdir()
    code_file = tmp_path / "plugins" / "x.py"
    code_file.write_text("a = 1\n")
    code = ds.code_digest(str(tmp_path))
    one = ds.inputs_fingerprint({"sglang_version": "0.5.9", "b": {"y": 1, "x": 2}}, code)
    assert one == ds.inputs_fingerprint({"b": {"x": 2, "y": 1}, "sglang_version": "0.5.9"}, code)
    assert one != ds.inputs_fingerprint({"sglang_version": "0.5.23", "b": {"y": 1, "x": 2}}, code)
    (tmp_path / "plugins" / "__pycache__").mkdir()
    (tmp_path / "plugins" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert ds.code_digest(str(tmp_path)) == code
    code_file.write_text("a = 2\n")
    assert ds.code_digest(str(tmp_path)) != code


def test_every_code_path_of_the_fingerprint_exists():
    # A path that moved drops out of the digest without a word: its changes would no longer
    # make a node change.
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    paths = set(ds.CODE_PATHS).union(*ds.LAYER_CODE_PATHS.values())
    assert sorted(path for path in paths if not os.path.exists(os.path.join(root, path))) == []


def test_a_record_that_is_not_json_says_what_to_do():
    try:
        ds.parse_record("{half", "/var/lib/inferops-serving/deployed.json")
    except ds.DeployStateError as exc:
        assert "remove it and deploy again" in str(exc)
    else:
        raise AssertionError("no error")


def test_a_patched_file_named_as_pip_names_it_is_found_in_the_venv(tmp_path):
    venv, site = make_venv(tmp_path, {"demo/patched.py": b"fused = False\n"})
    assert ds.absolute_files(["/etc/x", "demo/patched.py"], venv) == ["/etc/x", os.path.join(site, "demo/patched.py")]
    assert ds.absolute_files(["demo/patched.py"], None) == ["demo/patched.py"]


def test_an_experiment_of_server_flags_leaves_the_gpu_vm_and_the_venv_alone():
    roles = {"gpu_vm": ["gpu_vm_driver_branch"], "sglang": ["sglang_release_set", "sglang_sm120_allreduce_fusion_patch"]}
    assert ds.untouched_layers(["sglang_server_extra_args", "sglang_server_extra_env"], roles) == ["gpu_vm", "sglang"]
    # The patch is the venv's: the GPU VM stays.
    assert ds.untouched_layers(["sglang_sm120_allreduce_fusion_patch"], roles) == ["gpu_vm"]
    # The release set is read by both: gpu_vm installs its CUDA toolkit.
    assert ds.untouched_layers(["sglang_release_set"], roles) == []
    # The venv builds on what gpu_vm installs: a change beneath it converges it too.
    assert ds.untouched_layers(["gpu_vm_driver_branch"], roles) == []


def test_the_venv_layer_is_left_alone_only_with_the_gpu_vm_beneath_it():
    record = {"format": ds.RECORD_FORMAT, "fingerprint": "flags-a", "layers": {"gpu_vm": "driver-580", "sglang": "set-0.5.9"},
              "files": {}, "packages": {}, "distributions": {}, "service": None, "boot_id": "boot-1"}
    observed = {"files": {}, "packages": {}, "distributions": {}, "service": None, "boot_id": "boot-1"}
    same = {"gpu_vm": "driver-580", "sglang": "set-0.5.9"}
    assert ds.same_layers(record, "flags-b", same, observed) == ["gpu_vm", "sglang"]
    assert ds.same_layers(record, "flags-b", dict(same, sglang="set-0.5.23"), observed) == ["gpu_vm"]
    assert ds.same_layers(record, "flags-b", dict(same, gpu_vm="driver-590"), observed) == []
    # A record of a release that kept no layer of the venv.
    assert ds.same_layers(dict(record, layers={"gpu_vm": "driver-580"}), "flags-b", same, observed) == ["gpu_vm"]
