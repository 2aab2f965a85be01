# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README's commands, exactly as written there, typed into a plain shell.

Each command is read from README.md itself (so the README cannot drift from what is tested)
and run by bash in the checkout with an environment of PATH and HOME only: no make, no
ANSIBLE_* variable, no virtual environment on PATH. The lab node is the README's `gpu-node`;
the test makes it with the README's `make demo` and removes it afterwards unless it was there
before.
"""

import os
import re
import shutil
import subprocess

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = "gpu-node"
RECAP = re.compile(r"^%s\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=(\d+)" % NODE, re.M)


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
        self.env = plain_environment(home)

    def run(self, script, timeout=1800):
        """(exit status, output) of ``script`` run by bash in the checkout, stopping at the first failure."""
        proc = subprocess.run(["bash", "-e", "-c", script], cwd=REPO_ROOT, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)
        return proc.returncode, proc.stdout


def recap(output):
    """(changed, failed) of the lab node in the last play recap."""
    found = RECAP.findall(output)
    assert found, output[-3000:]
    changed, failed = found[-1]
    return int(changed), int(failed)


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
    rc, output = shell.run(line)
    assert rc == 0, output[-5000:]
    said = " ".join(output.split())
    assert "answers on the node at" in said or "is current" in said, output[-3000:]
    return output


def test_the_seed_story_runs_as_the_readme_tells_it(shell, demo):
    make_demo, topology, experiment, redeploy = commands(readme_block(
        "make demo                                                     # known-good server (deploy.yml)"))
    rc, output = shell.run(make_demo)
    assert rc == 0, output[-3000:]
    assert recap(output) == (0, 0), output[-3000:]

    rc, output = shell.run(topology)
    assert rc == 0, output[-3000:]
    assert "allreduce fusion" in output.lower() and "not advised" in output.lower(), output[-3000:]

    rc, output = shell.run(experiment)
    assert rc != 0, output[-3000:]
    assert "rolled back" in output, output[-3000:]

    rc, output = shell.run(redeploy)
    assert rc == 0, output[-3000:]
    assert recap(output) == (0, 0), output[-3000:]


# Each README block that ends in a deploy of the node the story left current: it plans in its
# own run and finds nothing to change.
NOOP_BLOCKS = [".venv/bin/ansible-playbook deploy.yml -l gpu-node",
               "cp -r inventories/lab ~/gpu-inventory",
               "export PATH=$PWD/.venv/bin:$PATH"]


@pytest.mark.parametrize("first_line", NOOP_BLOCKS, ids=["checkout", "outside-inventory", "installed-collection"])
def test_a_redeploy_as_the_readme_writes_it_plans_in_its_own_run_and_changes_nothing(shell, demo, first_line):
    rc, output = shell.run("\n".join(readme_block(first_line)))
    assert rc == 0, output[-3000:]
    assert recap(output) == (0, 0), output[-3000:]
    assert "current: gpu-node" in " ".join(output.split()), output[-3000:]


def test_a_bad_input_is_the_first_failure_and_changes_nothing(shell, demo):
    rc, output = shell.run(".venv/bin/ansible-playbook deploy.yml -l gpu-node "
                           "-e '{\"sglang_server_extra_env\": [\"NCCL_MIN_NCHANNELS=16\"]}'")
    assert rc != 0
    failures = [line for line in output.splitlines() if line.startswith(("[ERROR]", "fatal:", "failed:"))]
    assert failures, output[-3000:]
    assert "sglang_server_extra_env must be a mapping (key: value), got a list." in failures[0], output[-3000:]
    assert "TASK [inferops.serving.gpu_vm : Install" not in output
    # The failed plan released the node lock it took: another controller is not kept waiting.
    assert subprocess.run(["docker", "exec", NODE, "test", "-e", "/var/lib/inferops-serving/node.lock"],
                          check=False).returncode == 1
    rc, output = shell.run(".venv/bin/ansible-playbook deploy.yml -l gpu-node")
    assert rc == 0 and recap(output) == (0, 0), output[-3000:]
