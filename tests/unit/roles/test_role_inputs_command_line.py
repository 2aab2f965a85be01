# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``-e name=value`` through the roles' real input check: ansible-playbook against this machine in check mode.

Every value of ``-e name=value`` is text. The roles' input task (inferops.serving.role_inputs) takes
the text of a number or a boolean as that number or boolean and refuses the rest, naming the option,
the value and the form expected, before any other task. The exhaustive table of forms is pure Python
(tests/unit/plugins/module_utils/test__role_inputs_every_option.py); these runs prove the same on the
real roles, a process per command line, all at once.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import ANSIBLE_PLAYBOOK, checkout_environment, run_playbook

NOTHING_CHANGED = 'Nothing was changed on this host.'

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK),
                                reason='needs ansible-playbook next to the test interpreter')

# (id, role, task file, command line, None when taken, else the words of the refusal)
RUNS = [
    ('server-numbers-and-booleans-as-text', 'sglang_server', 'inputs',
     ['-e', 'sglang_server_start_timeout=60', '-e', 'sglang_server_allow_root=false',
      '-e', 'sglang_server_predownload=yes', '-e', '{"sglang_server_device_allow": ["char-nvidiactl"]}'], None),
    ('server-timeout-in-words', 'sglang_server', 'inputs', ['-e', 'sglang_server_start_timeout=soon'],
     "sglang_server_start_timeout must be a whole number, got the text 'soon'."),
    ('server-boolean-maybe', 'sglang_server', 'inputs', ['-e', 'sglang_server_allow_root=maybe'],
     "sglang_server_allow_root must be true or false, got the text 'maybe'"),
    ('server-list-as-text', 'sglang_server', 'inputs', ['-e', 'sglang_server_device_allow=char-nvidiactl,char-nvidia-uvm'],
     'sglang_server_device_allow must be a list, got the text \'char-nvidiactl,char-nvidia-uvm\'. On the command line'
     ' give it as JSON: -e \'{"sglang_server_device_allow": ["char-nvidiactl", "char-nvidia-uvm"]}\'.'),
    ('node-metrics-port-empty', 'node_metrics', 'preflight', ['-e', 'node_metrics_port='],
     "node_metrics_port must be a whole number, got an empty text ('')."),
    ('node-metrics-port-range', 'node_metrics', 'preflight', ['-e', 'node_metrics_port=70000'],
     'node_metrics_port must be a TCP port from 1 to 65535, got 70000.'),
    ('gpu-vm-branch-and-count-as-text', 'gpu_vm', 'inputs',
     ['-e', 'gpu_vm_driver_branch=580', '-e', 'gpu_vm_expected_gpu_count=2', '-e', 'gpu_vm_reboot=no'], None),
    # A real entry point: Ansible's own argument check converts "50" first, then the role's check refuses it.
    ('proxmox-vmid-below-100', 'proxmox_gpu_vm', 'restart', ['-e', 'proxmox_gpu_vm_vmid=50'],
     "proxmox_gpu_vm_vmid must be the VM's Proxmox id (100 or more), set as a host variable of the GPU VM in the"
     " inventory, got 50."),
]


@pytest.fixture(scope='module')
def outcomes(tmp_path_factory):
    """Every run of RUNS at once: id -> PlaybookRun."""
    work = tmp_path_factory.mktemp('command-line')
    inventory = work / 'hosts.yml'
    inventory.write_text(json.dumps({'all': {'hosts': {'testhost': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}}}}))
    env = checkout_environment(ANSIBLE_HOME=str(work / 'ansible-home'))
    command_lines = {}
    for run_id, role, tasks_from, arguments, _words in RUNS:
        playbook = work / ('%s.yml' % run_id)
        playbook.write_text(json.dumps([{
            'name': 'The input check of %s' % role, 'hosts': 'testhost', 'gather_facts': False,
            'tasks': [{'ansible.builtin.import_role': {'name': 'inferops.serving.%s' % role,
                                                       'tasks_from': tasks_from}}]}]))
        command_lines[run_id] = ['-i', str(inventory), '--check', str(playbook)] + arguments
    with ThreadPoolExecutor(max_workers=len(command_lines)) as pool:
        runs = {run_id: pool.submit(run_playbook, command_line, env=env, timeout=120)
                for run_id, command_line in command_lines.items()}
    return {run_id: future.result() for run_id, future in runs.items()}


@pytest.mark.parametrize('run_id, role, tasks_from, arguments, words', RUNS, ids=[run[0] for run in RUNS])
def test_a_command_line_value_is_taken_as_its_type_or_refused_by_name(outcomes, run_id, role, tasks_from,
                                                                      arguments, words):
    result = outcomes[run_id]
    assert "inferops.serving.%s : Check the role's inputs before anything changes" % role in result.tasks('testhost'), \
        result.summary
    if words is None:
        assert result.returncode == 0, result.summary
        assert result.recap['testhost'].failed == 0, result.summary
    else:
        assert result.returncode != 0
        assert len(result.failures('testhost')) == 1, result.summary
        failure = ' '.join(result.failures('testhost')[0].split())
        assert words in failure, result.summary
        assert NOTHING_CHANGED in failure, result.summary
        assert not result.said('Traceback') and not result.said('filter plugin'), result.summary
