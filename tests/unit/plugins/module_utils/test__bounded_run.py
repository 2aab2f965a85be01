# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A command run within a time bound: real processes that answer, hang, ignore SIGTERM, or hold
their pipes past SIGKILL (the stand-in for an nvidia-smi stuck in the driver, which no signal ends)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._bounded_run import CommandTimeout, run_bounded


def python(tmp_path, code):
    script = tmp_path / "command.py"
    script.write_text(textwrap.dedent(code))
    return [sys.executable, str(script)]


def test_a_command_that_answers_gives_its_exit_code_and_output(tmp_path):
    run = run_bounded(python(tmp_path, """
        import sys
        print("out"); print("err", file=sys.stderr); sys.exit(3)
    """), timeout=30)
    assert (run["rc"], run["stdout"], run["stderr"]) == (3, "out\n", "err\n")
    assert not run["timed_out"] and not run["stuck"] and run["seconds"] < 30


def test_output_that_is_not_utf8_is_read_with_replacements(tmp_path):
    run = run_bounded(python(tmp_path, """
        import sys
        sys.stdout.buffer.write(b"GPU \\xff ok")
    """), timeout=30)
    assert run["rc"] == 0 and run["stdout"] == "GPU \ufffd ok"


def test_a_command_past_its_bound_is_killed_with_every_process_of_its_group(tmp_path):
    marker = tmp_path / "child-alive"
    run = run_bounded(python(tmp_path, """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c",
                          "import time, pathlib\\nwhile True:\\n pathlib.Path(%r).touch(); time.sleep(0.1)"])
        print("started", flush=True)
        time.sleep(600)
    """ % str(marker)), timeout=2, grace=1)
    assert run["timed_out"] and not run["stuck"] and "started" in run["stdout"]
    marker.unlink()
    # The grandchild was in the same process group: it no longer touches the file.
    time.sleep(0.5)
    assert not marker.exists()


def test_a_command_that_ignores_sigterm_is_killed(tmp_path):
    started = time.time()
    run = run_bounded(python(tmp_path, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring", flush=True)
        time.sleep(600)
    """), timeout=1, grace=1)
    assert run["timed_out"] and not run["stuck"] and run["rc"] == -signal.SIGKILL
    assert time.time() - started < 10


def test_a_command_that_outlives_sigkill_is_left_behind_and_the_bound_still_holds(tmp_path):
    """Its output pipe is held by a process in a session of its own, which the kill of the command's
    group does not reach: what the caller sees is what a process stuck in the kernel gives it."""
    pid_file = tmp_path / "holder.pid"
    started = time.time()
    run = run_bounded(python(tmp_path, """
        import subprocess, sys, time
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        open(%r, "w").write(str(holder.pid))
        print("partial", flush=True)
        time.sleep(600)
    """ % str(pid_file)), timeout=1, grace=1)
    try:
        assert run["timed_out"] and run["stuck"]
        assert run["stdout"] == "" and run["stderr"] == ""
        # timeout + grace after SIGTERM + grace after SIGKILL, and no wait on the holder.
        assert time.time() - started < 8
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_program_that_cannot_start_raises(tmp_path):
    with pytest.raises(OSError):
        run_bounded([str(tmp_path / "absent")], timeout=5)


def test_the_timeout_is_described_with_the_command_and_whether_it_could_be_stopped():
    assert str(CommandTimeout(["nvidia-smi", "-q", "-x"], 60, False)) == "`nvidia-smi -q -x` did not answer within 60 s"
    assert str(CommandTimeout(["nvidia-smi"], 2.5, True)) == (
        "`nvidia-smi` did not answer within 2.5 s and did not end when killed (it waits in the kernel)")


def test_the_environment_and_folder_given_are_the_commands(tmp_path):
    run = run_bounded(python(tmp_path, """
        import os
        print(os.environ["LC_ALL"], os.getcwd())
    """), timeout=30, env=dict(os.environ, LC_ALL="C"), cwd=str(tmp_path))
    assert run["stdout"].split() == ["C", str(tmp_path)]


def test_a_command_runs_in_a_session_of_its_own(tmp_path):
    run = run_bounded(python(tmp_path, """
        import os
        print(os.getsid(0) == os.getpid())
    """), timeout=30)
    assert run["stdout"].strip() == "True"
    # Nothing of the command is left running.
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "command.py")], capture_output=True, check=False).returncode == 1
