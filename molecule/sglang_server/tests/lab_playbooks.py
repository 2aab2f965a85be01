# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the scenario's tests share: one of its playbooks run again against the node, read as data."""

import json
import os

import yaml

from ansible_collections.inferops.serving.tests.utils.playbook import REPO_ROOT, run_scenario_playbook

with open(os.path.join(REPO_ROOT, "roles", "sglang_server", "handlers", "main.yml"), encoding="utf-8") as handle:
    SERVER_HANDLERS = [handler["name"] for handler in yaml.safe_load(handle)]


def run_playbook(playbook, extra_vars=None, check=False):
    """Run one of the scenario's playbooks (a file of this scenario's folder) against its inventory."""
    arguments = [os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], playbook)]
    if extra_vars:
        arguments += ["-e", json.dumps(extra_vars)]
    return run_scenario_playbook(*(arguments + (["--check"] if check else [])))


def changed(run):
    """The changed count of the run's recap, over its hosts."""
    return sum(recap.changed for recap in run.recap.values())


def server_handlers_ran(run):
    """The server role's handlers that ran (a restart, the notes around it), by name."""
    return [name for _host, name, result in run.results
            if name.split(" : ", 1)[-1] in SERVER_HANDLERS and not result.get("skipped")]
