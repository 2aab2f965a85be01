# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy_state on a node: the record, the plan, and the files an experiment changed put back."""
import json
import os

MODULE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules", "deploy_state.py")


def lay_out(tmp_path):
    unit = tmp_path / "etc" / "sglang.service"
    env = tmp_path / "etc" / "sglang.env"
    unit.parent.mkdir()
    unit.write_text("ExecStart=/x --tp 8\n")
    env.write_text("SGLANG_API_KEY=k\n")
    os.chmod(env, 0o600)
    return {"path": str(tmp_path / "state" / "deployed.json"), "history": str(tmp_path / "history.jsonl")}, unit, env


def test_a_recorded_node_is_current_until_a_file_changes(run_module, tmp_path):
    where, unit, env = lay_out(tmp_path)
    assert run_module(state="query", fingerprint="fp", **where)["plan"] == "new"
    recorded = run_module(state="present", fingerprint="fp", files=[str(unit), str(env)], **where)
    assert recorded["changed"]
    assert oct(os.stat(where["path"]).st_mode & 0o777) == "0o600"
    assert not run_module(state="present", fingerprint="fp", files=[str(unit), str(env)], **where)["changed"]
    assert run_module(state="query", fingerprint="fp", **where)["plan"] == "current"
    unit.write_text("ExecStart=/x --tp 4\n")
    planned = run_module(state="query", fingerprint="fp", **where)
    assert planned["plan"] == "changes"
    assert planned["reasons"] == ["%s changed since the last deploy" % unit]
    assert run_module(state="query", fingerprint="other", **where)["plan"] == "changes"


def test_absent_forgets_a_record_of_other_inputs_only(run_module, tmp_path):
    where, unit, _env = lay_out(tmp_path)
    run_module(state="present", fingerprint="fp", files=[str(unit)], **where)
    assert not run_module(state="absent", fingerprint="fp", **where)["changed"]
    assert run_module(state="absent", fingerprint="next", **where)["changed"]
    assert not os.path.exists(where["path"])
    (tmp_path / "history.jsonl").write_text("{}\n")
    assert run_module(state="query", fingerprint="fp", **where)["plan"] == "changes"


def test_the_files_an_experiment_changed_are_put_back_as_they_were(run_module, tmp_path):
    where, unit, env = lay_out(tmp_path)
    run_module(state="present", fingerprint="baseline", files=[str(unit), str(env)], **where)
    kept = run_module(state="snapshot", fingerprint="baseline", **where)
    assert kept["snapshot"] and kept["same_inputs"], kept
    # The experiment's converge: another unit, and its own record.
    unit.write_text("ExecStart=/x --tp 8 --enable-flashinfer-allreduce-fusion\n")
    run_module(state="present", fingerprint="experiment", files=[str(unit), str(env)], **where)
    restored = run_module(state="restore", **where)
    assert restored["restored"] and restored["changed"], restored
    assert restored["files"] == [str(unit)]
    assert unit.read_text() == "ExecStart=/x --tp 8\n"
    assert oct(os.stat(env).st_mode & 0o777) == "0o600"
    assert run_module(state="query", fingerprint="baseline", **where)["plan"] == "current"
    assert not run_module(state="restore", **where)["changed"]


def test_nothing_is_put_back_when_files_alone_cannot_bring_the_node_back(run_module, tmp_path):
    where, unit, _env = lay_out(tmp_path)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "demo_pkg-1.0.dist-info").mkdir(parents=True)
    (site / "demo_pkg-1.0.dist-info" / "RECORD").write_text("")
    run_module(state="present", fingerprint="baseline", files=[str(unit)], venv=str(tmp_path / "venv"),
               distributions=["demo-pkg"], **where)
    assert run_module(state="snapshot", **where)["snapshot"]
    os.rename(site / "demo_pkg-1.0.dist-info", site / "demo_pkg-2.0.dist-info")
    unit.write_text("changed\n")
    refused = run_module(state="restore", **where)
    assert not refused["restored"] and not refused["changed"]
    assert refused["reasons"] == ["demo-pkg is 2.0 in %s, the last deploy left 1.0" % (tmp_path / "venv")]
    assert unit.read_text() == "changed\n"


def test_no_snapshot_of_a_node_that_drifted_from_its_record(run_module, tmp_path):
    where, unit, _env = lay_out(tmp_path)
    run_module(state="present", fingerprint="baseline", files=[str(unit)], **where)
    unit.write_text("hand edit\n")
    refused = run_module(state="snapshot", fingerprint="baseline", **where)
    assert not refused["snapshot"] and not refused["same_inputs"]
    assert refused["reasons"] == ["%s changed since the last deploy" % unit]


def test_a_snapshot_says_whether_the_record_names_this_runs_inputs(run_module, tmp_path):
    # Inventory changed since the last deploy: the node is as recorded, but not for these inputs,
    # so an experiment must converge every layer (the pending change included).
    where, unit, _env = lay_out(tmp_path)
    run_module(state="present", fingerprint="deployed", files=[str(unit)], **where)
    kept = run_module(state="snapshot", fingerprint="inventory-changed-since", **where)
    assert kept["snapshot"] and not kept["same_inputs"], kept


def test_a_layer_whose_own_inputs_are_unchanged_may_be_left_alone(run_module, tmp_path):
    # Only the server's flags changed: the stack's fingerprint differs, the GPU VM layer's does not.
    where, unit, _env = lay_out(tmp_path)
    run_module(state="present", fingerprint="flags-a", layers={"gpu_vm": "driver-580"}, files=[str(unit)], **where)
    planned = run_module(state="query", fingerprint="flags-b", layers={"gpu_vm": "driver-580"}, **where)
    assert planned["plan"] == "changes" and planned["same_layers"] == ["gpu_vm"], planned
    # The layer's own inputs changed (another driver branch): it converges.
    assert run_module(state="query", fingerprint="flags-b", layers={"gpu_vm": "driver-590"}, **where)["same_layers"] == []
    # The node drifted from its record (a hand edit): every layer converges.
    unit.write_text("hand edit\n")
    assert run_module(state="query", fingerprint="flags-b", layers={"gpu_vm": "driver-580"}, **where)["same_layers"] == []


def test_a_record_without_layers_leaves_none_alone(run_module, tmp_path):
    where, unit, _env = lay_out(tmp_path)
    run_module(state="present", fingerprint="old-release", files=[str(unit)], **where)
    assert run_module(state="query", fingerprint="new", layers={"gpu_vm": "x"}, **where)["same_layers"] == []


def test_a_restart_since_the_deploy_does_not_stop_the_files_being_kept_and_put_back(run_module, tmp_path):
    # A node rebooted since its deploy: as recorded, but its layers are read again (same_inputs false).
    where, unit, _env = lay_out(tmp_path)
    run_module(state="present", fingerprint="baseline", files=[str(unit)], **where)
    record = json.loads(open(where["path"]).read())
    record["boot_id"] = "a-boot-before"
    with open(where["path"], "w") as handle:
        handle.write(json.dumps(record))
    kept = run_module(state="snapshot", fingerprint="baseline", **where)
    assert kept["snapshot"] and not kept["same_inputs"], kept
    unit.write_text("ExecStart=/x --tp 8 --enable-flashinfer-allreduce-fusion\n")
    restored = run_module(state="restore", **where)
    assert restored["restored"] and restored["files"] == [str(unit)], restored
    assert unit.read_text() == "ExecStart=/x --tp 8\n"
    # The record as it was: the next deploy still reads the GPUs of this boot again.
    assert json.loads(open(where["path"]).read())["boot_id"] == "a-boot-before"
    planned = run_module(state="query", fingerprint="baseline", **where)
    assert planned["plan"] == "changes" and "restarted" in planned["reasons"][0], planned


def test_a_restart_during_the_experiment_leaves_the_rollback_to_a_converge(run_module, tmp_path):
    where, unit, _env = lay_out(tmp_path)
    run_module(state="present", fingerprint="baseline", files=[str(unit)], **where)
    assert run_module(state="snapshot", fingerprint="baseline", **where)["snapshot"]
    (tmp_path / "state" / "before-trial" / "boot_id").write_text("the-boot-of-the-snapshot\n")
    unit.write_text("changed\n")
    refused = run_module(state="restore", **where)
    assert not refused["restored"] and not refused["changed"], refused
    assert refused["reasons"] == ["the node restarted since the files were kept (its GPUs and topology are read again)"]
    assert unit.read_text() == "changed\n"
