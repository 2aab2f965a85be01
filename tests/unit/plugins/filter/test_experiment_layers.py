# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which layers of the stack an experiment's trial may leave as the deploy record has them,
read from the roles' own argument specs and the shipped experiments."""
import os

import yaml

from ansible_collections.inferops.serving.plugins.filter.experiment import FilterModule

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def shipped_experiments():
    with open(os.path.join(ROOT, "roles", "serving", "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)["_serving_shipped_experiments"]


def untouched(name):
    plan = FilterModule().filters()["experiment_plan"](shipped_experiments(), name, {"allreduce_fusion_advised": True})
    return plan["untouched_layers"]


def test_a_server_flag_or_nccl_experiment_converges_only_the_server():
    assert untouched("max_running_requests_2048") == ["gpu_vm", "sglang"]
    assert untouched("nccl_min_nchannels_16") == ["gpu_vm", "sglang"]


def test_the_sm120_patch_converges_the_venv_and_leaves_the_gpu_vm():
    assert untouched("sm120_allreduce_fusion") == ["gpu_vm"]


def test_an_upgrade_converges_every_layer():
    # The release set's CUDA toolkit is installed by gpu_vm, its venv by sglang.
    assert untouched("sglang_upgrade_0_5_23") == []


def test_a_layer_left_as_recorded_runs_its_roles_installation_only():
    from ansible_collections.inferops.serving.plugins.filter.deployment import FilterModule as Deployment
    from ansible.errors import AnsibleFilterError
    import pytest
    entry = Deployment().filters()["layer_entry_point"]
    assert [entry(layer, untouched("sm120_allreduce_fusion")) for layer in ("gpu_vm", "sglang")] == ["installation", "main"]
    assert entry("sglang", []) == entry("sglang") == "main"
    with pytest.raises(AnsibleFilterError, match="not a layer"):
        entry("sglang_server", ["sglang_server"])
