# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the scenario's tests share: one of its playbooks run again against the node, and its recap."""

import json
import os
import subprocess


def run_playbook(playbook, extra_vars=None, check=False, verbose=False, args=()):
    """Run one of the scenario's playbooks (a file of this scenario's folder) against its inventory;
    returns (rc, stdout and stderr together)."""
    cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"]] + (["-v"] if verbose else [])
    cmd += list(args) + [os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], playbook)]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd += ["--check"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    return proc.returncode, proc.stdout


def recap_changed(output):
    """The changed count of the last play recap in ``output``."""
    line = [line for line in output.splitlines() if "changed=" in line and "ok=" in line][-1]
    return int(line.split("changed=")[1].split()[0])
