# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import copy
import os

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils._anchored_patch import (
    AnchoredPatchError,
    anchor_problems,
    apply_edits,
    execute,
    plan,
    pristine_store_path,
    undo_edits,
    validate_files,
)
from record_hashes import encode_hash

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "anchored_patch")
SOURCES = {
    "flashinfer/jit/comm.py": "comm.py",
    "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh": "trtllm_allreduce.cuh",
    "sglang/srt/layers/communicator.py": "communicator.py",
}
DISTS = {"flashinfer-python": ("flashinfer_python-0.6.3.dist-info", "flashinfer"),
         "sglang": ("sglang-0.5.9.dist-info", "sglang")}
ROLE_PATCH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                          "roles", "sglang", "vars", "patches", "sm120_allreduce_fusion.yml")


def fixture(name):
    with open(os.path.join(FIXTURES, name), "rb") as handle:
        return handle.read()


def patch_files():
    with open(os.path.join(FIXTURES, "patch.yml")) as handle:
        return yaml.safe_load(handle)["files"]


def edits_for(path):
    return next(spec["edits"] for spec in patch_files() if spec["path"] == path)


@pytest.fixture
def site(tmp_path):
    """A site-packages with both distributions installed from the fixture excerpts, RECORD included."""
    root = tmp_path / "site-packages"
    for dist_info, prefix in DISTS.values():
        rows = []
        for rel, name in SOURCES.items():
            if not rel.startswith(prefix + "/"):
                continue
            data = fixture(name)
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            rows.append("%s,%s,%d" % (rel, encode_hash("sha256", data), len(data)))
        (root / dist_info).mkdir(parents=True)
        (root / dist_info / "RECORD").write_text("\n".join(rows + ["%s/RECORD,," % dist_info]) + "\n")
    return root


def snapshot(root):
    return dict((str(p.relative_to(root)), p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file())


def run(site, tmp_path, state, files=None, invalidate=None, fetch=None, stale=None):
    inspected = plan(files or patch_files(), state, [str(site)], str(tmp_path / "pristine"))
    removed = execute(inspected, str(tmp_path / "pristine"), invalidate, fetch, stale)
    return dict((i["path"], (i["status"], i["action"])) for i in inspected), removed


# ---------------------------------------------------------------- text edits

def test_scope_keeps_the_edit_inside_its_function():
    text = fixture("comm.py").decode()
    patched = apply_edits(text, edits_for("flashinfer/jit/comm.py"))
    assert patched.count("supported_major_versions=[9, 10, 12]") == 1
    assert patched.count("supported_major_versions=[9, 10]\n") == 1
    comm_fn = patched[patched.index("def gen_trtllm_comm_module("):patched.index("def gen_vllm_comm_module(")]
    assert "supported_major_versions=[9, 10, 12]" in comm_fn


def test_without_scope_the_second_list_makes_the_count_wrong():
    edits = [dict(edits_for("flashinfer/jit/comm.py")[0])]
    del edits[0]["scope"]
    problems = anchor_problems(fixture("comm.py").decode(), edits)
    assert len(problems) == 1
    assert problems[0]["found"].startswith("2 (at line 6, 13)")


def test_every_guard_line_is_replaced():
    text = fixture("trtllm_allreduce.cuh").decode()
    patched = apply_edits(text, edits_for("flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"))
    assert "__CUDA_ARCH__ < 1200" not in patched
    assert patched.count("#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))\n") == 3


def test_block_replacements_add_the_import_and_the_flag():
    patched = apply_edits(fixture("communicator.py").decode(), edits_for("sglang/srt/layers/communicator.py"))
    assert "    is_sm100_supported,\n    is_sm120_supported,\n)\n" in patched
    assert "_is_sm100_supported = _is_cuda and is_sm100_supported()\n" \
           "_is_sm120_supported = _is_cuda and is_sm120_supported()\n" in patched
    gate = patched[patched.index("def apply_flashinfer_allreduce_fusion("):patched.index("def fusion_supported_here(")]
    assert "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)" in gate
    assert patched.count("(_is_sm90_supported or _is_sm100_supported)\n") == 1


@pytest.mark.parametrize("rel", sorted(SOURCES))
def test_undo_gives_back_the_original_bytes(rel):
    text = fixture(SOURCES[rel]).decode()
    assert undo_edits(apply_edits(text, edits_for(rel)), edits_for(rel)) == text


def test_undo_of_an_unpatched_file_is_refused():
    rel = "sglang/srt/layers/communicator.py"
    assert undo_edits(fixture(SOURCES[rel]).decode(), edits_for(rel)) is None


def test_line_endings_are_kept():
    text = fixture("trtllm_allreduce.cuh").decode().replace("\n", "\r\n")
    patched = apply_edits(text, edits_for("flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"))
    assert "\n" not in patched.replace("\r\n", "")


def test_a_hand_edited_anchor_is_reported_with_expected_text_and_what_is_there():
    text = fixture("communicator.py").decode().replace(
        "_is_sm100_supported = _is_cuda and is_sm100_supported()", "_is_sm100_supported = True")
    with pytest.raises(AnchoredPatchError) as failure:
        apply_edits(text, edits_for("sglang/srt/layers/communicator.py"))
    (problem,) = failure.value.problems
    assert "1 x '_is_sm100_supported = _is_cuda and is_sm100_supported()'" in problem["expected"]
    assert problem["found"] == "0 (closest: line 14 '_is_sm100_supported = True')"


def test_an_appended_comment_is_pointed_at():
    text = fixture("communicator.py").decode().replace(
        "_is_sm100_supported = _is_cuda and is_sm100_supported()",
        "_is_sm100_supported = _is_cuda and is_sm100_supported()  # tuned")
    (problem,) = anchor_problems(text, edits_for("sglang/srt/layers/communicator.py"))
    assert problem["found"] == "0 (closest: line 14 '_is_sm100_supported = _is_cuda and is_sm100_supported()  # tuned')"


def test_a_missing_scope_is_reported():
    text = fixture("comm.py").decode().replace("def gen_trtllm_comm_module(", "def gen_comm_module(")
    (problem,) = anchor_problems(text, edits_for("flashinfer/jit/comm.py"))
    assert problem["found"] == "0 such lines"


@pytest.mark.parametrize("mutate, message", [
    (lambda f: f.clear(), "lists no files"),
    (lambda f: f[0].pop("version"), "files[0].version must be a non-empty string"),
    (lambda f: f[0].update(edits=[]), "files[0].edits must be a non-empty list"),
    (lambda f: f[0]["edits"][0].update(replace=f[0]["edits"][0]["find"]), "find and replace are identical"),
    (lambda f: f[0]["edits"][0].update(count=0), "count must be a positive integer"),
    (lambda f: f[0]["edits"][0].update(count=True), "count must be a positive integer"),
    (lambda f: f.append(copy.deepcopy(f[0])), "is listed twice"),
])
def test_malformed_patch_definitions_are_refused(mutate, message):
    files = patch_files()
    mutate(files)
    with pytest.raises(AnchoredPatchError) as failure:
        validate_files(files)
    assert message in str(failure.value)


def test_the_role_patch_definition_is_well_formed():
    with open(ROLE_PATCH) as handle:
        patch = yaml.safe_load(handle)["_sglang_sm120_allreduce_fusion_patch"]
    validate_files(patch["files"])
    guard = next(f for f in patch["files"] if f["path"].endswith("trtllm_allreduce.cuh"))
    assert guard["edits"][0]["count"] == 13
    assert sorted(f["path"] for f in patch["files"]) == [
        "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh",
        "flashinfer/jit/comm.py",
        "sglang/srt/layers/communicator.py",
        "sglang/srt/server_args.py",
    ]


# ---------------------------------------------------------------- files on disk

def test_patch_on_edits_every_file_and_keeps_pristine_copies(site, tmp_path):
    before = snapshot(site)
    actions = run(site, tmp_path, "present")[0]
    assert set(actions.values()) == {("pristine", "patch")}
    after = snapshot(site)
    assert [rel for rel in SOURCES if after[rel] != before[rel]] == list(SOURCES)
    for rel in SOURCES:
        dist = "sglang" if rel.startswith("sglang/") else "flashinfer-python"
        version = "0.5.9" if dist == "sglang" else "0.6.3"
        assert open(pristine_store_path(str(tmp_path / "pristine"), dist, version, rel), "rb").read() == before[rel]


def test_patch_on_twice_changes_nothing(site, tmp_path):
    run(site, tmp_path, "present")
    patched = snapshot(site)
    actions = run(site, tmp_path, "present")[0]
    assert set(actions.values()) == {("patched", "none")}
    assert snapshot(site) == patched


def test_an_interrupted_patch_is_finished_by_rerunning(site, tmp_path):
    first = [f for f in patch_files() if f["path"] == "flashinfer/jit/comm.py"]
    run(site, tmp_path, "present", files=first)
    actions = run(site, tmp_path, "present")[0]
    assert actions["flashinfer/jit/comm.py"] == ("patched", "none")
    assert actions["sglang/srt/layers/communicator.py"] == ("pristine", "patch")


def test_patched_files_are_recognised_without_the_pristine_store(site, tmp_path):
    run(site, tmp_path, "present")
    (tmp_path / "pristine").rename(tmp_path / "lost")
    actions = run(site, tmp_path, "present")[0]
    assert set(actions.values()) == {("patched", "none")}


def test_a_hand_edit_stops_the_patch_before_anything_is_written(site, tmp_path):
    target = site / "sglang/srt/layers/communicator.py"
    target.write_text(target.read_text().replace("_is_sm100_supported = _is_cuda and is_sm100_supported()",
                                                 "_is_sm100_supported = _is_cuda and is_sm100_supported()  # mine"))
    before = snapshot(site)
    with pytest.raises(AnchoredPatchError) as failure:
        run(site, tmp_path, "present")
    assert "sglang/srt/layers/communicator.py" in str(failure.value)
    assert "nothing was changed" in str(failure.value)
    assert snapshot(site) == before
    assert not (tmp_path / "pristine").exists()


def test_another_installed_version_is_refused_naming_both_versions(site, tmp_path):
    (site / "sglang-0.5.9.dist-info").rename(site / "sglang-0.5.10.dist-info")
    before = snapshot(site)
    with pytest.raises(AnchoredPatchError) as failure:
        run(site, tmp_path, "present")
    assert "written for sglang 0.5.9, but 0.5.10 is installed" in str(failure.value)
    assert snapshot(site) == before


def test_a_distribution_that_is_not_installed_is_refused(site, tmp_path):
    files = patch_files() + [{"distribution": "sgl-kernel", "version": "0.3.21", "path": "sgl_kernel/x.py",
                              "edits": [{"find": "a", "replace": "b"}]}]
    with pytest.raises(AnchoredPatchError, match="sgl-kernel is not installed"):
        run(site, tmp_path, "present", files=files)


def test_patch_off_restores_the_bytes_pip_installed_and_drops_builds(site, tmp_path):
    pristine = snapshot(site)
    run(site, tmp_path, "present")
    build = tmp_path / "cache" / "0.6.3" / "120a" / "cached_ops" / "trtllm_comm"
    build.mkdir(parents=True)
    (build / "build.ninja").write_text("cuda_cflags = -gencode=arch=compute_120a,code=sm_120a\n")
    other = tmp_path / "cache" / "0.6.3" / "120a" / "cached_ops" / "norm"
    other.mkdir()
    actions, removed = run(site, tmp_path, "absent",
                           invalidate=[str(tmp_path / "cache" / "0.6.3" / "*" / "cached_ops" / "trtllm_comm")])
    assert set(actions.values()) == {("patched", "restore")}
    assert snapshot(site) == pristine
    assert removed == [str(build)]
    assert not build.exists() and other.exists()


def test_patch_off_on_pristine_files_changes_nothing(site, tmp_path):
    build = tmp_path / "cache" / "trtllm_comm"
    build.mkdir(parents=True)
    actions, removed = run(site, tmp_path, "absent", invalidate=[str(build)])
    assert set(actions.values()) == {("pristine", "none")}
    assert removed == [] and build.exists()


def test_a_hand_edit_is_restored_by_patch_off_from_the_store(site, tmp_path):
    pristine = snapshot(site)
    run(site, tmp_path, "present")
    target = site / "flashinfer/jit/comm.py"
    target.write_text(target.read_text() + "# local\n")
    actions = run(site, tmp_path, "absent")[0]
    assert actions["flashinfer/jit/comm.py"] == ("drifted", "restore")
    assert snapshot(site) == pristine


def test_patch_off_undoes_the_edits_when_the_store_is_gone(site, tmp_path):
    pristine = snapshot(site)
    run(site, tmp_path, "present")
    (tmp_path / "pristine").rename(tmp_path / "lost")
    run(site, tmp_path, "absent", fetch=lambda info: pytest.fail("no download needed"))
    assert snapshot(site) == pristine


def test_a_hand_edit_without_any_pristine_copy_is_fetched_and_proven(site, tmp_path):
    pristine = snapshot(site)
    target = site / "sglang/srt/layers/communicator.py"
    target.write_bytes(b"broken\n")
    fetched = []

    def fetch(info):
        fetched.append(info["path"])
        return pristine[info["path"]]
    run(site, tmp_path, "absent", fetch=fetch)
    assert fetched == ["sglang/srt/layers/communicator.py"]
    assert snapshot(site) == pristine


def test_a_fetched_copy_that_does_not_match_record_is_refused(site, tmp_path):
    target = site / "sglang/srt/layers/communicator.py"
    target.write_bytes(b"broken\n")
    with pytest.raises(AnchoredPatchError, match="matches its RECORD sha256"):
        run(site, tmp_path, "absent", fetch=lambda info: b"something else\n")
    assert target.read_bytes() == b"broken\n"


def test_a_deleted_file_is_restored(site, tmp_path):
    pristine = snapshot(site)
    run(site, tmp_path, "present")
    (site / "flashinfer/jit/comm.py").unlink()
    actions = run(site, tmp_path, "absent")[0]
    assert actions["flashinfer/jit/comm.py"] == ("missing", "restore")
    assert snapshot(site) == pristine


def test_patch_off_ignores_distributions_that_are_not_installed(site, tmp_path):
    files = patch_files() + [{"distribution": "sgl-kernel", "version": "0.3.21", "path": "sgl_kernel/x.py",
                              "edits": [{"find": "a", "replace": "b"}]}]
    actions = run(site, tmp_path, "absent", files=files)[0]
    assert actions["sgl_kernel/x.py"] == ("not_installed", "none")


def test_restored_files_keep_their_mode(site, tmp_path):
    target = site / "flashinfer/jit/comm.py"
    os.chmod(str(target), 0o640)
    run(site, tmp_path, "present")
    run(site, tmp_path, "absent")
    assert os.stat(str(target)).st_mode & 0o777 == 0o640


def test_a_stale_build_is_removed_even_when_no_file_changes(site, tmp_path):
    cached_ops = tmp_path / "cache" / "0.6.3" / "120a" / "cached_ops"
    for module, flags in (("trtllm_comm", "code=sm_120a"), ("norm", "code=sm_120a")):
        (cached_ops / module).mkdir(parents=True)
        (cached_ops / module / "build.ninja").write_text("cuda_cflags = -gencode=arch=compute_120a,%s\n" % flags)
    rule = {"path": str(tmp_path / "cache" / "0.6.3" / "*" / "cached_ops" / "trtllm_comm"),
            "contains": "code=sm_12[0-9]"}
    actions, removed = run(site, tmp_path, "absent", stale=[rule])
    assert set(actions.values()) == {("pristine", "none")}
    assert removed == [str(cached_ops / "trtllm_comm")]
    assert (cached_ops / "norm").exists()


def test_a_build_for_other_architectures_is_not_stale(site, tmp_path):
    build = tmp_path / "cache" / "0.6.3" / "90a" / "cached_ops" / "trtllm_comm"
    build.mkdir(parents=True)
    (build / "build.ninja").write_text("cuda_cflags = -gencode=arch=compute_90a,code=sm_90a\n")
    rule = {"path": str(tmp_path / "cache" / "0.6.3" / "*" / "cached_ops" / "trtllm_comm"),
            "contains": "code=sm_12[0-9]"}
    assert run(site, tmp_path, "absent", stale=[rule])[1] == []
    assert build.exists()
