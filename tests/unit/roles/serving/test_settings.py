# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wrong serving_* values stop a playbook before anything on a node is read or changed.

Argument specs check types and choices; the role's first task checks the ranges that specs cannot
express. Runs playbooks/benchmark.yml against this machine (connection local, check mode): the run
must stop at validation, before the first task that touches the node.
"""
import json
import os
import sys

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import ANSIBLE_PLAYBOOK, run_playbook

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK),
                                reason='needs ansible-playbook next to the test interpreter')


def has_run(result, task):
    """Whether a task named TASK (any role's) ran on testhost."""
    return any(name == task or name.endswith(' : ' + task) for name in result.tasks('testhost'))


def run(tmp_path, inventory_text='gpu_nodes:\n  hosts:\n    testhost:\n      ansible_connection: local\n',
        **settings):
    extra = dict(settings, ansible_python_interpreter=sys.executable, ansible_become=False,
                 serving_history_path=str(tmp_path / 'history.jsonl'),
                 serving_reports_dir=str(tmp_path / 'reports'))
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text(inventory_text)
    return run_playbook(['-i', str(inventory), '--check', 'playbooks/benchmark.yml', '-e', json.dumps(extra)])


@pytest.mark.parametrize('settings, message', [
    ({'serving_deploy_serial': 0}, 'serving_deploy_serial must be a number of nodes of at least 1'),
    ({'serving_max_regression': 1.5}, 'in [0, 1), e.g. 0.1 for 10%'),
    ({'serving_benchmark_concurrency': 0}, 'serving_benchmark_concurrency'),
    ({'serving_benchmark_mode': 'fast'}, 'serving_benchmark_mode'),
    ({'serving_max_regression': 'ten percent'}, 'serving_max_regression'),
    ({'serving_experiments': ['sm120_allreduce_fusion']}, 'serving_experiments'),
    ({'serving_benchmark_repeats': 0}, 'serving_benchmark_repeats is 1 or more (got 0'),
    ({'serving_gate_objective': 'latency'}, 'serving_gate_objective'),
    ({'serving_gate_inconclusive': 'maybe'}, 'serving_gate_inconclusive'),
    ({'serving_lock_min_agreement': 1.5}, 'serving_lock_min_agreement is a fraction in [0, 1] (got 1.5)'),
    ({'serving_lock_prompts': []}, 'serving_lock_prompts needs at least one prompt'),
])
def test_a_wrong_setting_stops_the_run_before_the_node_is_touched(tmp_path, settings, message):
    result = run(tmp_path, **settings)
    assert result.returncode != 0
    assert any(message in failure for failure in result.failures('testhost')), result.summary
    # The first task that reads the node never ran.
    assert not has_run(result, "Read the node's history"), result.summary


def test_valid_settings_get_past_validation(tmp_path):
    result = run(tmp_path, serving_deploy_serial=2, serving_max_regression=0.2)
    # Stops at the node's missing history instead: validation and the range checks passed.
    assert result.returncode != 0
    assert any("testhost has no deploy in" in failure for failure in result.failures('testhost')), result.summary


# A router the run never contacts: its variables are all the check reads.
ROUTED = """gpu_nodes:
  hosts:
    testhost:
      ansible_connection: local
      sglang_server_api_key: servers-key-not-a-secret
sglang_routers:
  hosts:
    router-1:
      ansible_connection: local
      sglang_router_package: %s
      sglang_router_api_key: %s
"""


def test_behind_smg_a_client_key_the_servers_refuse_stops_the_run_first(tmp_path):
    result = run(tmp_path, ROUTED % ('smg', 'clients-key-not-a-secret'))
    assert result.returncode != 0
    assert result.said("The router on router-1 runs smg (sglang_router_package), which passes the key clients send on"
                       " to the servers; its sglang_router_api_key is not the sglang_server_api_key of testhost"), result.summary
    assert not has_run(result, "Read the node's history"), result.summary
    assert 'servers-key-not-a-secret' not in result.output and 'clients-key-not-a-secret' not in result.output


@pytest.mark.parametrize('package, client_key', [('smg', 'servers-key-not-a-secret'),
                                                 ('sglang-router', 'clients-key-not-a-secret')])
def test_a_router_whose_client_key_reaches_the_servers_passes(tmp_path, package, client_key):
    result = run(tmp_path, ROUTED % (package, client_key))
    assert result.returncode != 0 and result.said("testhost has no deploy in"), result.summary


@pytest.mark.parametrize('branch', ['570', 570], ids=['text-as-from-e', 'yaml-number'])
def test_a_driver_branch_below_the_release_sets_is_refused_for_that_reason(tmp_path, branch):
    """`-e gpu_vm_driver_branch=570` and `gpu_vm_driver_branch: 570` are one branch: the deploy's
    plan refuses release set 0.5.23 for it, naming the branch it needs, before the node changes."""
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text('gpu_nodes:\n  hosts:\n    testhost:\n      ansible_connection: local\n')
    extra = dict(ansible_python_interpreter=sys.executable, ansible_become=False, sglang_release_set='0.5.23',
                 gpu_vm_driver_branch=branch, serving_history_path=str(tmp_path / 'history.jsonl'))
    result = run_playbook(['-i', str(inventory), '--check', 'deploy.yml', '-e', json.dumps(extra)])
    assert result.returncode != 0
    assert result.failures('testhost'), result.summary
    assert ("sglang_release_set 0.5.23 needs NVIDIA driver branch 580 or later (CUDA 13.0), but the node's driver is"
            " branch 570") in result.failures('testhost')[0], result.summary
    # Neither a crash of a filter nor a refusal of the branch's spelling.
    assert not result.said('plugin') and not result.said('three digits'), result.summary
