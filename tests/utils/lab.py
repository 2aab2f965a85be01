# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the tests know of the lab, read from the lab inventory rather than copied into each test.

Every scenario's serving nodes take their settings from inventories/lab/group_vars/gpu_nodes/lab.yml
(linked into each scenario's inventory), so a test that calls a lab node uses the key written there.
"""

import os
import subprocess

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_NODE_VARS = 'inventories/lab/group_vars/gpu_nodes/lab.yml'


def inventory_vars(path):
    """The variables of one group_vars file (a path from the repository's root)."""
    with open(os.path.join(REPO_ROOT, path), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


# The lab's made-up API key, no secret: a lab node's server asks every client for it.
LAB_API_KEY = inventory_vars(LAB_NODE_VARS)['sglang_server_api_key']


def container_address(name):
    """Lab container NAME's address on its docker network (the first, where it is on several)."""
    addresses = subprocess.run(['docker', 'inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', name],
                               check=True, capture_output=True, text=True).stdout.split()
    assert addresses, 'container %s has no address on a docker network' % name
    return addresses[0]
