# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU health gate on a node whose nvidia-smi never answers (a GPU that fell off the bus leaves it
waiting in the driver): the role's gpu_health entry point, run against this machine with a stand-in
nvidia-smi on PATH, ends within sglang_server_gpu_health_timeout and says the GPUs are not fit to serve."""
import json
import os
import sys
import time

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import (
    ANSIBLE_PLAYBOOK,
    checkout_environment,
    run_playbook,
)

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK),
                                reason='needs ansible-playbook next to the test interpreter')

PLAYBOOK = """
- name: The GPU health gate, as the serving role includes it
  hosts: testhost
  gather_facts: false
  tasks:
    - name: Check the GPUs
      ansible.builtin.include_role:
        name: inferops.serving.sglang_server
        tasks_from: gpu_health

    - name: Show the verdict the gate published
      ansible.builtin.debug:
        msg: "verdict {{ sglang_server_gpu_health | to_json }}"
"""


def run_gate(tmp_path, **settings):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    smi = bin_dir / 'nvidia-smi'
    smi.write_text('#!%s\nimport time\ntime.sleep(600)\n' % sys.executable)
    smi.chmod(0o755)
    (tmp_path / 'kernel.log').write_text('')
    (tmp_path / 'gate.yml').write_text(PLAYBOOK)
    (tmp_path / 'hosts.yml').write_text('all:\n  hosts:\n    testhost:\n      ansible_connection: local\n')
    extra = dict(settings, ansible_python_interpreter=sys.executable, ansible_become=False,
                 sglang_server_gpu_health_expected_gpus=1,
                 sglang_server_gpu_health_kernel_log_file=str(tmp_path / 'kernel.log'))
    env = checkout_environment(PATH=os.pathsep.join([str(bin_dir), os.environ['PATH']]))
    started = time.time()
    result = run_playbook(['-i', str(tmp_path / 'hosts.yml'), str(tmp_path / 'gate.yml'), '-e', json.dumps(extra)],
                          env=env)
    return result, time.time() - started


def test_a_gpu_that_hangs_nvidia_smi_stops_the_gate_within_its_timeout_saying_what_to_do(tmp_path):
    result, seconds = run_gate(tmp_path, sglang_server_gpu_health_timeout=2)
    assert result.returncode != 0 and seconds < 60, result.summary
    failures = result.failures('testhost')
    assert any(failure.startswith('GPU health gate: the GPUs of testhost are not fit to serve')
               and '-q -x` did not answer within 2 s. The NVIDIA driver is stuck on a GPU' in failure
               for failure in failures), result.summary


def test_a_gate_that_only_publishes_its_verdict_lets_the_caller_hold_the_node_back(tmp_path):
    """As the serving role's plan runs it on every node of a fleet: the verdict, not a stop."""
    result, seconds = run_gate(tmp_path, sglang_server_gpu_health_timeout=2, sglang_server_gpu_health_stop=False)
    assert result.returncode == 0 and seconds < 60, result.summary
    verdicts = [json.loads(message.split('verdict ', 1)[1]) for message in result.messages() if 'verdict {' in message]
    assert len(verdicts) == 1 and verdicts[0]['checked'] is True and verdicts[0]['fit'] is False
    assert 'did not answer within 2 s' in verdicts[0]['message']
