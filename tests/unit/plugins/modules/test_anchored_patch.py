# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from record_hashes import encode_hash
from ansible_collections.inferops.serving.plugins.modules import anchored_patch
from ansible_collections.inferops.serving.tests.utils.module_result import run_in_process

ORIGINAL = b"def gen_trtllm_comm_module():\n    return flags(\n        supported_major_versions=[9, 10]\n    )\n"
FILES = [{
    "distribution": "flashinfer-python",
    "version": "0.6.3",
    "path": "flashinfer/jit/comm.py",
    "edits": [{"find": "        supported_major_versions=[9, 10]", "replace": "        supported_major_versions=[9, 10, 12]",
               "count": 1, "scope": "def gen_trtllm_comm_module("}],
}]


def run(args, capsys):
    return run_in_process(anchored_patch.main, args, capsys)


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site-packages"
    (root / "flashinfer/jit").mkdir(parents=True)
    (root / "flashinfer/jit/comm.py").write_bytes(ORIGINAL)
    (root / "flashinfer_python-0.6.3.dist-info").mkdir()
    (root / "flashinfer_python-0.6.3.dist-info" / "RECORD").write_text(
        "flashinfer/jit/comm.py,%s,%d\n" % (encode_hash("sha256", ORIGINAL), len(ORIGINAL)))
    return root


def args(site, tmp_path, **extra):
    base = {"name": "sm120", "files": FILES, "site_packages": str(site), "pristine_dir": str(tmp_path / "pristine"),
            "invalidate": [str(tmp_path / "jit" / "*" / "trtllm_comm")]}
    base.update(extra)
    return base


def test_check_mode_reports_the_patch_and_writes_nothing(site, tmp_path, capsys):
    build = tmp_path / "jit" / "120a" / "trtllm_comm"
    build.mkdir(parents=True)
    result = run(args(site, tmp_path, _ansible_check_mode=True), capsys)
    assert result["changed"] is True
    assert result["patched"] == ["flashinfer/jit/comm.py"]
    assert result["invalidated"] == [str(build)]
    assert (site / "flashinfer/jit/comm.py").read_bytes() == ORIGINAL
    assert build.exists() and not (tmp_path / "pristine").exists()


def test_patch_then_rerun_then_revert(site, tmp_path, capsys):
    first = run(args(site, tmp_path), capsys)
    again = run(args(site, tmp_path), capsys)
    revert = run(args(site, tmp_path, state="absent"), capsys)
    revert_again = run(args(site, tmp_path, state="absent"), capsys)
    assert [r["changed"] for r in (first, again, revert, revert_again)] == [True, False, True, False]
    assert first["files"][0]["status"] == "pristine" and again["files"][0]["status"] == "patched"
    assert revert["restored"] == ["flashinfer/jit/comm.py"]
    assert (site / "flashinfer/jit/comm.py").read_bytes() == ORIGINAL


def test_anchor_failure_lists_every_problem(site, tmp_path, capsys):
    (site / "flashinfer/jit/comm.py").write_bytes(ORIGINAL.replace(b"[9, 10]", b"[9]"))
    result = run(args(site, tmp_path), capsys)
    assert result["failed"] is True
    assert len(result["problems"]) == 1
    assert "supported_major_versions=[9, 10]" in result["problems"][0]
    assert "hand edit" in result["msg"]


def test_revert_of_a_hand_edit_warns_naming_the_file(site, tmp_path, capsys, monkeypatch):
    # Where a warning ends up depends on whether controller code was imported in this process.
    warned = []
    monkeypatch.setattr(anchored_patch.AnsibleModule, "warn", lambda self, message: warned.append(message))
    run(args(site, tmp_path), capsys)
    (site / "flashinfer/jit/comm.py").write_bytes(b"# replaced by hand\n")
    result = run(args(site, tmp_path, state="absent"), capsys)
    assert result["drifted"] == ["flashinfer/jit/comm.py"]
    assert len(warned) == 1 and "flashinfer/jit/comm.py" in warned[0]
    assert (site / "flashinfer/jit/comm.py").read_bytes() == ORIGINAL


def test_without_interpreter_or_pristine_copy_the_revert_fails_clearly(site, tmp_path, capsys):
    (site / "flashinfer/jit/comm.py").write_bytes(b"# replaced by hand\n")
    result = run(args(site, tmp_path, state="absent"), capsys)
    assert result["failed"] is True
    assert "no pristine copy of flashinfer/jit/comm.py" in result["msg"]
    assert (site / "flashinfer/jit/comm.py").read_bytes() == b"# replaced by hand\n"


def test_check_mode_reports_a_stale_build_without_removing_it(site, tmp_path, capsys):
    build = tmp_path / "jit" / "120a" / "trtllm_comm"
    build.mkdir(parents=True)
    (build / "build.ninja").write_text("-gencode=arch=compute_120a,code=sm_120a\n")
    stale = [{"path": str(tmp_path / "jit" / "*" / "trtllm_comm"), "contains": "code=sm_12[0-9]"}]
    checked = run(args(site, tmp_path, state="absent", stale=stale, _ansible_check_mode=True), capsys)
    assert (checked["changed"], checked["invalidated"]) == (True, [str(build)]) and build.exists()
    removed = run(args(site, tmp_path, state="absent", stale=stale), capsys)
    again = run(args(site, tmp_path, state="absent", stale=stale), capsys)
    assert (removed["changed"], again["changed"]) == (True, False) and not build.exists()
