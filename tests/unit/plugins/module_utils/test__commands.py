# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Commands run in the C locale within a time bound, one after another or all at once."""

import os
import subprocess
import sys
import time

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._commands import (
    NVIDIA_SMI_STUCK,
    CommandTimeout,
    nvidia_smi_listing_problems,
    run_c,
    run_c_together,
)


class Failed(Exception):
    pass


class FakeModule(object):
    """Only what the bounded runs use of an AnsibleModule: fail_json, on an error that is not a timeout."""

    def fail_json(self, **kwargs):
        raise Failed(kwargs)


def answers(text):
    return [sys.executable, "-c", "import os, sys; print(%r, os.environ['LC_ALL'])" % text]


HANGS = [sys.executable, "-c", "import time; time.sleep(600)"]


def test_a_bounded_command_answers_in_the_c_locale():
    assert run_c(FakeModule(), answers("gpu"), timeout=30) == (0, "gpu C\n", "")


def test_a_bounded_command_that_does_not_answer_raises_naming_it_and_its_bound():
    started = time.time()
    with pytest.raises(CommandTimeout) as raised:
        run_c(FakeModule(), HANGS, timeout=1)
    assert time.time() - started < 20
    assert raised.value.argv == HANGS and raised.value.timeout == 1 and raised.value.stuck is False
    assert str(raised.value) == "`%s` did not answer within 1 s" % " ".join(HANGS)


def test_commands_run_together_answer_in_the_order_given():
    assert run_c_together(FakeModule(), [answers("a"), answers("b")], timeout=30) == [
        (0, "a C\n", ""), (0, "b C\n", "")]


def test_one_command_of_several_that_does_not_answer_raises_after_the_bound_not_after_their_sum():
    started = time.time()
    with pytest.raises(CommandTimeout) as raised:
        run_c_together(FakeModule(), [answers("a"), HANGS, HANGS], timeout=1)
    assert time.time() - started < 20
    assert raised.value.argv == HANGS


def test_a_command_that_cannot_start_fails_the_module_naming_it(tmp_path):
    missing = str(tmp_path / "nvidia-smi")
    with pytest.raises(Failed) as raised:
        run_c_together(FakeModule(), [answers("a"), [missing, "topo", "-m"]], timeout=5)
    assert raised.value.args[0]["msg"].startswith("Cannot run %s topo -m: " % missing)


# The two GPUs of a 2x H200 node as `nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader`
# prints them: the first three columns of the capture that queried more.
TWO_H200 = os.path.join(os.path.dirname(__file__), 'fixtures', 'topology', 'h200x2-2026-11-29', 'query_module.txt')


def _listing(path):
    with open(path) as handle:
        rows = handle.read().splitlines()[1:]
    return ''.join(', '.join(row.split(', ')[:3]) + '\n' for row in rows)


def _bounded_listing(program, bound):
    """What the gpu_vm role's task runs: coreutils' timeout around PROGRAM (the lab has no stuck GPU)."""
    run = subprocess.run(['timeout', '--kill-after=1', str(bound), program, '--query-gpu=index,name,pci.bus_id',
                          '--format=csv,noheader'], capture_output=True, text=True, check=False)
    return run.returncode, run.stdout, run.stderr


def test_a_listing_of_every_gpu_has_no_problem_and_a_short_one_says_how_many():
    listing = _listing(TWO_H200)
    assert listing.splitlines()[1] == '1, NVIDIA H200, 00000000:00:07.0'
    assert nvidia_smi_listing_problems(0, listing, '', 2, 60) == []
    problems = nvidia_smi_listing_problems(0, listing, '', 8, 60)
    assert problems[0] == 'nvidia-smi lists 2 GPU(s), expected 8 (gpu_vm_expected_gpu_count, or the PCI count).'
    assert 'dkms status' in problems[1]


def test_an_nvidia_smi_that_never_answers_is_ended_by_timeout_and_named_as_a_stuck_driver(tmp_path):
    stuck = tmp_path / 'nvidia-smi'
    stuck.write_text('#!/bin/sh\nsleep 600\n')
    stuck.chmod(0o755)
    started = time.time()
    rc, stdout, stderr = _bounded_listing(str(stuck), 1)
    assert time.time() - started < 10
    assert nvidia_smi_listing_problems(rc, stdout, stderr, 8, 1) == [
        'nvidia-smi did not answer within 1 s (gpu_vm_nvidia_smi_timeout).', NVIDIA_SMI_STUCK]


def test_an_nvidia_smi_that_is_not_installed_is_a_failure_with_what_timeout_said(tmp_path):
    rc, stdout, stderr = _bounded_listing(str(tmp_path / 'nvidia-smi'), 60)
    problems = nvidia_smi_listing_problems(rc, stdout, stderr, 8, 60)
    assert problems[0].startswith('nvidia-smi failed (exit status 127: timeout: failed to run command'), problems
    assert 'No such file or directory' in problems[0]


@pytest.mark.parametrize('rc, printed, words', [
    # Real texts: a GPU index the node lacks (H200, driver 580), and the well-known text of a node whose driver
    # is not loaded.
    (6, 'No devices were found', 'nvidia-smi failed (exit status 6: No devices were found).'),
    (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.", 'nvidia-smi found no NVIDIA driver loaded (exit status 9: NVIDIA-SMI'),
])
def test_a_failed_nvidia_smi_names_its_status_and_last_line_and_where_to_look(rc, printed, words):
    problems = nvidia_smi_listing_problems(rc, printed + '\n', '', 8, 60)
    assert problems[0].startswith(words), problems
    assert 'dmesg | grep -i nvrm' in problems[1]


def test_a_gpu_fallen_off_the_bus_says_to_reset_or_reboot():
    printed = 'Unable to determine the device handle for GPU0000:81:00.0: GPU is lost.  Reboot the system to recover this GPU'
    problems = nvidia_smi_listing_problems(15, '', printed, 8, 60)
    assert problems == ['nvidia-smi found a GPU that fell off the bus (exit status 15: %s).' % printed, NVIDIA_SMI_STUCK]
