# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_health module as Ansible runs it: its file, executed with a JSON arguments file."""

import os
import signal
import sys
import time

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE = os.path.join(REPO_ROOT, "plugins", "modules", "gpu_health.py")
FIXTURES = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "gpu_health")


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


REAL_XML = fixture("h200-2026-12-01", "q.xml")
REAL_LOG = fixture("h200-2026-12-01", "kernel.log")


def fake_program(folder, name, output, rc=0):
    """A stand-in for a program that prints ``output`` and exits with ``rc``."""
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text("#!/bin/sh\ncat <<'EOF'\n%sEOF\nexit %d\n" % (output, rc))
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_real_h200_read_from_its_texts_is_healthy(check_mode, run_module):
    result = run_module(smi_xml=REAL_XML, kernel_log=REAL_LOG, expected_gpu_count=1, _ansible_check_mode=check_mode)
    assert not result.get("failed") and result["changed"] is False
    assert result["healthy"] is True and result["verdict"] == "healthy: 1 GPU (NVIDIA H200) fit to serve"
    assert result["kernel_log_source"] == "kernel_log" and result["xids_checked"] is True
    assert result["fatal_xids"] == [48, 79, 95, 119, 154] and "warnings" not in result


def test_the_kernel_log_is_read_from_a_file_on_the_node_when_one_is_named(tmp_path, run_module):
    log = tmp_path / "kernel.log"
    log.write_text(REAL_LOG + fixture("xid", "xid-79.log"))
    result = run_module(nvidia_smi=fake_program(tmp_path / "bin", "nvidia-smi", REAL_XML), kernel_log_file=str(log),
                        expected_gpu_count=1)
    assert result["healthy"] is False and result["action"] == "reboot"
    assert result["kernel_log_source"] == str(log) and result["xids_checked"] is True
    result = run_module(smi_xml=REAL_XML, kernel_log_file=str(tmp_path / "absent.log"))
    assert result["failed"] and result["msg"].startswith("Cannot read kernel_log_file %s: " % (tmp_path / "absent.log"))
    result = run_module(smi_xml=REAL_XML, kernel_log="", kernel_log_file=str(log))
    assert result["failed"] and "mutually exclusive" in result["msg"]


def test_a_fault_read_from_its_texts_is_unhealthy_with_what_to_do(run_module):
    result = run_module(smi_xml=fixture("faults", "row-remap-pending.xml"),
                        kernel_log=REAL_LOG + fixture("xid", "xid-48.log"), expected_gpu_count=1)
    assert not result.get("failed") and result["healthy"] is False and result["action"] == "reset"
    assert [finding["check"] for finding in result["gpus"][0]["findings"]] == ["xid", "row_remapping_pending"]
    assert len(result["problems"]) == 2


def test_nvidia_smi_and_the_kernel_log_are_read_from_the_node(tmp_path, monkeypatch, run_module):
    bin_dir = tmp_path / "bin"
    smi = fake_program(bin_dir, "nvidia-smi", REAL_XML)
    # A host without a persistent journal answers with nothing: dmesg is read instead.
    fake_program(bin_dir, "journalctl", "")
    fake_program(bin_dir, "dmesg", REAL_LOG + fixture("xid", "xid-154-reboot.log"))
    monkeypatch.setenv("PATH", "%s%s%s" % (bin_dir, os.pathsep, os.environ["PATH"]))
    result = run_module(nvidia_smi=smi, expected_gpu_count=1)
    assert not result.get("failed") and result["kernel_log_source"] == "dmesg"
    assert result["healthy"] is False and result["action"] == "reboot"
    assert result["verdict"] == "unhealthy (reboot): GPU 0 Xid 79; GPU 0 Xid 154"


def test_warnings_are_returned_and_shown(run_module):
    result = run_module(smi_xml=fixture("faults", "persistence-off.xml"), kernel_log="")
    assert result["healthy"] is True and len(result["gpu_warnings"]) == 1
    assert any("persistence mode is off" in str(warning) for warning in result["warnings"])


def test_a_saved_xml_alone_is_not_judged_by_this_hosts_kernel_log(run_module):
    result = run_module(smi_xml=REAL_XML)
    assert result["healthy"] is True and result["xids_checked"] is False and result["kernel_log_source"] is None


def test_nvidia_smi_failing_fails_the_task_instead_of_answering_healthy(tmp_path, run_module):
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    result = run_module(nvidia_smi=fake_program(tmp_path / "bin", "nvidia-smi", message, 9), kernel_log="")
    assert result["failed"] and result["healthy"] is False and result["rc"] == 9
    assert "couldn't communicate with the NVIDIA driver" in result["msg"] and "-q -x failed with rc 9" in result["msg"]


def test_nvidia_smi_failing_after_describing_some_gpus_makes_the_node_unhealthy(tmp_path, run_module):
    output = "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error\n" + REAL_XML
    result = run_module(nvidia_smi=fake_program(tmp_path / "bin", "nvidia-smi", output, 15), kernel_log="")
    assert not result.get("failed") and result["healthy"] is False and result["action"] == "investigate"
    assert "exit code 15: Unable to determine the device handle" in result["problems"][0]


def test_output_that_is_not_the_xml_fails_with_that_output(tmp_path, run_module):
    result = run_module(nvidia_smi=fake_program(tmp_path / "bin", "nvidia-smi", "Segmentation fault\n"), kernel_log="")
    assert result["failed"] and result["healthy"] is False
    assert "Cannot read nvidia-smi -q -x" in result["msg"] and result["stdout"].startswith("Segmentation")


def test_an_unreadable_saved_xml_fails_naming_the_option(run_module):
    result = run_module(smi_xml=REAL_XML[:500], kernel_log="")
    assert result["failed"] and result["msg"].startswith("Cannot read smi_xml: the output of nvidia-smi -q -x is not XML")


def test_a_node_without_nvidia_smi_fails_saying_so(run_module):
    result = run_module(nvidia_smi="nvidia-smi-absent-here", kernel_log="")
    assert result["failed"] and "nvidia-smi-absent-here not found" in result["msg"] and result["healthy"] is False


def test_an_expected_count_below_one_is_refused(run_module):
    result = run_module(smi_xml=REAL_XML, kernel_log="", expected_gpu_count=0)
    assert result["failed"] and "expected_gpu_count must be 1 or more" in result["msg"]


def hanging_program(folder, name, holder_pid_file=None):
    """A stand-in for nvidia-smi waiting on a GPU that fell off the bus: it never answers. With
    ``holder_pid_file``, a process in a session of its own holds its output open, so that killing it
    ends nothing the caller waits for: what an nvidia-smi stuck in the driver gives its caller."""
    folder.mkdir(exist_ok=True)
    script = folder / name
    holder = ("import subprocess\nholder = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
              "start_new_session=True)\nopen(%r, 'w').write(str(holder.pid))\n" % str(holder_pid_file)
              if holder_pid_file else "")
    script.write_text("#!%s\nimport sys, time\n%stime.sleep(600)\n" % (sys.executable, holder))
    script.chmod(0o755)
    return str(script)


def test_nvidia_smi_that_never_answers_fails_within_the_timeout_saying_the_driver_is_stuck(tmp_path, run_module):
    smi = hanging_program(tmp_path / "bin", "nvidia-smi")
    started = time.time()
    result = run_module(nvidia_smi=smi, kernel_log="", timeout=1)
    assert time.time() - started < 30
    assert result["failed"] and result["healthy"] is False and result["nvidia_smi_timeout"] is True
    assert result["msg"].startswith("`%s -q -x` did not answer within 1 s. The NVIDIA driver is stuck on a GPU" % smi)
    assert "dmesg | grep -i xid" in result["msg"] and result["cmd"] == [smi, "-q", "-x"]


def test_nvidia_smi_that_outlives_being_killed_is_left_behind_and_the_task_still_ends(tmp_path, run_module):
    pid_file = tmp_path / "holder.pid"
    smi = hanging_program(tmp_path / "bin", "nvidia-smi", holder_pid_file=pid_file)
    started = time.time()
    try:
        result = run_module(nvidia_smi=smi, kernel_log="", timeout=1)
        assert time.time() - started < 30
        assert result["failed"] and result["healthy"] is False and result["nvidia_smi_timeout"] is True
        assert "did not answer within 1 s and did not end when killed (it waits in the kernel)" in result["msg"]
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_timeout_below_one_second_is_refused(run_module):
    result = run_module(smi_xml=REAL_XML, kernel_log="", timeout=0)
    assert result["failed"] and "timeout must be 1 or more seconds, got 0" in result["msg"]
