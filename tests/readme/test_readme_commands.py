# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README's commands, exactly as written there, typed into a plain shell.

Each command is read from README.md itself (so the README cannot drift from what is tested)
and run by bash in the checkout with an environment of PATH and HOME only: no make, no virtual
environment on PATH, no ANSIBLE_* variable but the two that print each playbook's result as JSON
(tests/utils/playbook.py), which change what is printed, not what runs. The lab node is the README's `gpu-node`;
the test makes it with the README's `make demo` and removes it afterwards unless it was there
before.
"""

import os
import shutil
import subprocess

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import JSON_OUTPUT, PlaybookRun

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = "gpu-node"


def readme_blocks():
    """The README's indented code blocks, each a list of lines without the indent."""
    with open(os.path.join(REPO_ROOT, "README.md")) as handle:
        lines = handle.read().splitlines()
    blocks, block, previous_blank = [], [], True
    for line in lines + [""]:
        if line.startswith("    ") and (block or previous_blank):
            block.append(line[4:])
        elif line.strip() == "" and block:
            blocks.append(block)
            block = []
        elif block:
            blocks.append(block)
            block = []
        previous_blank = line.strip() == ""
    return blocks


def readme_block(first_line):
    """The README block that starts with ``first_line``, as it stands there."""
    matches = [block for block in readme_blocks() if block[0] == first_line]
    assert len(matches) == 1, "README.md has %d code blocks starting with %r" % (len(matches), first_line)
    return matches[0]


def commands(block):
    """A block's shell commands, continuation lines joined as the shell joins them."""
    joined, current = [], ""
    for line in block:
        current += line
        if line.endswith("\\"):
            current = current[:-1] + " "
            continue
        joined.append(current)
        current = ""
    return joined


def plain_environment(home):
    path = os.pathsep.join(part for part in os.environ["PATH"].split(os.pathsep)
                           if part and not part.startswith(os.path.join(REPO_ROOT, ".venv")))
    return {"PATH": path, "HOME": str(home)}


class Shell:
    def __init__(self, home):
        self.env = dict(plain_environment(home), **JSON_OUTPUT)

    def run(self, script, timeout=1800):
        """``script`` run by bash in the checkout, stopping at the first failure: its exit status and
        output, the last playbook it ran read as data (a PlaybookRun)."""
        proc = subprocess.run(["bash", "-e", "-c", script], cwd=REPO_ROOT, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)
        return PlaybookRun(proc.returncode, proc.stdout)


def recap(run):
    """(changed, failed) of the lab node in the last playbook's recap, which reached the node."""
    assert NODE in run.recap and run.recap[NODE].unreachable == 0, run.summary
    return run.recap[NODE].changed, run.recap[NODE].failed


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    node_was_there = subprocess.run(["docker", "inspect", NODE], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, check=False).returncode == 0
    home = tmp_path_factory.mktemp("home")
    yield Shell(home)
    shutil.rmtree(os.path.join(REPO_ROOT, "dist"), ignore_errors=True)
    if not node_was_there:
        subprocess.run(["make", "lab-destroy"], cwd=REPO_ROOT, env=plain_environment(home),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


@pytest.fixture(scope="module")
def demo(shell):
    """The quick start's first command: the full deploy against the lab node."""
    line = [line for line in readme_block("make demo     # full deploy against the local lab node `gpu-node`")
            if line.startswith("make demo")][0]
    run = shell.run(line)
    assert run.returncode == 0, run.summary
    assert run.said("answers on the node at") or run.said("is current"), run.summary
    return run


def test_the_seed_story_runs_as_the_readme_tells_it(shell, demo):
    make_demo, topology, experiment, redeploy = commands(readme_block(
        "make demo                                                     # known-good server (deploy.yml)"))
    run = shell.run(make_demo)
    assert run.returncode == 0, run.summary
    assert recap(run) == (0, 0), run.summary

    run = shell.run(topology)
    assert run.returncode == 0, run.summary
    said = "\n".join(run.messages()).lower()
    assert "allreduce fusion" in said and "not advised" in said, run.summary

    run = shell.run(experiment)
    assert run.returncode != 0, run.summary
    assert run.said("rolled back"), run.summary

    run = shell.run(redeploy)
    assert run.returncode == 0, run.summary
    assert recap(run) == (0, 0), run.summary


# Each README block that ends in a deploy of the node the story left current: it plans in its
# own run and finds nothing to change.
NOOP_BLOCKS = [".venv/bin/ansible-playbook deploy.yml -l gpu-node",
               "cp -r inventories/lab ~/gpu-inventory",
               "export PATH=$PWD/.venv/bin:$PATH"]


@pytest.mark.parametrize("first_line", NOOP_BLOCKS, ids=["checkout", "outside-inventory", "installed-collection"])
def test_a_redeploy_as_the_readme_writes_it_plans_in_its_own_run_and_changes_nothing(shell, demo, first_line):
    run = shell.run("\n".join(readme_block(first_line)))
    assert run.returncode == 0, run.summary
    assert recap(run) == (0, 0), run.summary
    assert run.said("current: gpu-node"), run.summary


def test_a_bad_input_is_the_first_failure_and_changes_nothing(shell, demo):
    run = shell.run(".venv/bin/ansible-playbook deploy.yml -l gpu-node "
                    "-e '{\"sglang_server_extra_env\": [\"NCCL_MIN_NCHANNELS=16\"]}'")
    assert run.returncode != 0
    failures = run.failures(NODE)
    assert failures, run.summary
    assert "sglang_server_extra_env must be a mapping (key: value), got a list." in failures[0], run.summary
    assert not [name for name in run.tasks(NODE) if name.startswith("inferops.serving.gpu_vm : Install")], run.summary
    # The failed plan released the node lock it took: another controller is not kept waiting.
    assert subprocess.run(["docker", "exec", NODE, "test", "-e", "/var/lib/inferops-serving/node.lock"],
                          check=False).returncode == 1
    run = shell.run(".venv/bin/ansible-playbook deploy.yml -l gpu-node")
    assert run.returncode == 0 and recap(run) == (0, 0), run.summary
