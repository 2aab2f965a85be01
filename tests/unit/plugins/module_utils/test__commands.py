# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Commands run in the C locale within a time bound, one after another or all at once."""

import sys
import time

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._commands import (
    CommandTimeout,
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
