# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils._inputs import role_input_errors, serial
from ansible_collections.inferops.serving.plugins.module_utils._sglang_release_sets import release_errors

RELEASE_SETS = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'sglang', 'vars', 'release_sets.yml')

SECRET = 'sk-abc"def'

GPU_VM = {
    'gpu_vm_sysfs_root': '/sys',
    'gpu_vm_cuda_repo_base_url': 'https://developer.download.nvidia.com/compute/cuda/repos',
    'gpu_vm_expected_gpu_count': None, 'gpu_vm_cuda_home': '/usr/local/cuda-12.8', 'gpu_vm_reboot_timeout': 900,
    'gpu_vm_cuda_extra_releases': [], 'gpu_vm_nvidia_smi_timeout': 60,
}
SGLANG = {
    'sglang_release_set': '0.5.9', 'sglang_driver_branch': '',
    'sglang_version': '', 'sglang_flashinfer_version': '', 'sglang_flashinfer_cubin_version': '',
    'sglang_sgl_kernel_version': '', 'sglang_torch_version': '', 'sglang_service_user': 'sglang',
    'sglang_venvs_dir': '/opt/sglang/venvs', 'sglang_venvs_keep': 2, 'sglang_venvs_served': [], 'sglang_release_sets': {},
    'sglang_state_dir': '/var/lib/sglang', 'sglang_pip_extra_args': '',
    'sglang_allow_root_service_user': False, 'sglang_service_group': 'sglang', 'sglang_venv_pip_version': '25.3',
    'sglang_venv_wheel_version': '0.45.1',
}
SERVER = {
    'sglang_server_api_key': 'lab-api-key-not-a-secret', 'sglang_server_hf_token': '',
    'sglang_server_args': {'model-path': 'lukealonso/GLM-5-NVFP4', 'port': 8000},
    'sglang_server_extra_args': {}, 'sglang_server_env': {'NCCL_P2P_LEVEL': '5', 'OMP_NUM_THREADS': 8},
    'sglang_server_extra_env': {'PYTHONPATH': '/opt/x', 'WITH_QUOTES': 'a "b" $c `d` \\e'},
    'sglang_server_service_user': 'sglang', 'sglang_server_service_group': 'sglang',
    'sglang_server_allow_root': False, 'sglang_server_venv_path': '/opt/sglang/venv',
    'sglang_server_state_dir': '/var/lib/sglang', 'sglang_server_config_dir': '/etc/sglang',
    'sglang_server_hf_home': '/var/lib/sglang/huggingface', 'sglang_server_launch': 'sglang serve',
    'sglang_server_package': 'sglang',
    'sglang_server_unit_name': 'sglang', 'sglang_server_start_timeout': 7200, 'sglang_server_stop_timeout': 120,
    'sglang_server_restart_sec': 30, 'sglang_server_start_limit_burst': 3, 'sglang_server_limit_nofile': 1048576,
    'sglang_server_health_timeout': '7200', 'sglang_server_health_interval': 5, 'sglang_server_journal_lines': 50,
    'sglang_server_predownload_timeout': 86400, 'sglang_server_predownload_poll': 10,
    'sglang_server_gpu_health_timeout': 60,
    'sglang_server_model_revision': '', 'sglang_server_weights_disk_margin': '5%', 'sglang_server_read_write_paths': ['-/run/inferops-lab'],
    'sglang_server_device_allow': ['char-nvidiactl'], 'sglang_server_system_call_filter': [],
}
ROLES = {'gpu_vm': GPU_VM, 'sglang': SGLANG, 'sglang_server': SERVER}


def test_a_pinned_commit_and_a_revision_flag_are_one_too_many():
    problems = role_input_errors('sglang_server', dict(
        SERVER, sglang_server_model_revision='a' * 40, sglang_server_extra_args={'revision': 'b' * 40}))
    assert problems == ['sglang_server_model_revision and a revision flag in the server arguments both set the '
                        'revision: remove the flag, sglang_server_model_revision passes it to the server.']
    assert role_input_errors('sglang_server', dict(SERVER, sglang_server_model_revision='a' * 40)) == []


@pytest.mark.parametrize('role', sorted(ROLES))
def test_the_shipped_defaults_pass(role):
    assert role_input_errors(role, ROLES[role]) == []


# (role, variable, bad value, words the message must contain)
BAD = [
    ('sglang', 'sglang_service_user', '', 'must be a user name'),
    ('sglang', 'sglang_service_user', 'Bad User', 'must be a user name'),
    ('sglang', 'sglang_state_dir', 'var/lib/sglang', 'absolute path'),
    ('sglang', 'sglang_venvs_dir', '', 'absolute path'),
    ('sglang', 'sglang_venvs_keep', 0, 'sglang_venvs_keep must be a number of venvs'),
    ('sglang', 'sglang_release_sets', {'0.5.24': {'cuda': '13.0'}},
     'release set 0.5.24 has no packages'),
    ('sglang', 'sglang_release_sets', {'0.5.24-x': {
        'description': 'd', 'cuda': '13.0', 'driver_branch_min': '580', 'python': '>=3.11',
        'packages': {'sglang': '0.5.23', 'flashinfer-python': '0.7.2', 'torch': '2.14.1', 'sglang-kernel': '0.4.10'}}},
     'a set is named after its SGLang release'),
    ('sglang', 'sglang_release_sets', ['0.5.24'], 'sglang_release_sets must be a mapping'),
    ('gpu_vm', 'gpu_vm_cuda_home', 'usr/local/cuda', 'absolute path'),
    ('gpu_vm', 'gpu_vm_reboot_timeout', 0, 'at least 1'),
    ('gpu_vm', 'gpu_vm_nvidia_smi_timeout', 0, 'at least 1'),
    ('gpu_vm', 'gpu_vm_cuda_repo_base_url', 'developer.download.nvidia.com', 'http(s)://'),
    ('gpu_vm', 'gpu_vm_expected_gpu_count', 0, 'a GPU count of at least 1'),
    ('gpu_vm', 'gpu_vm_expected_gpu_count', 'eight', 'a GPU count of at least 1'),
    ('sglang', 'sglang_venv_pip_version', 'latest', 'exact version'),
    ('sglang', 'sglang_version', 'latest', 'exact version'),
    ('sglang', 'sglang_release_set', '', 'a release set name'),
    ('sglang', 'sglang_driver_branch', '58', 'three digits'),
    ('sglang', 'sglang_driver_branch', 5800, 'three digits'),
    ('sglang', 'sglang_driver_branch', True, 'three digits'),
    ('sglang', 'sglang_driver_branch', 58.0, 'three digits'),
    ('gpu_vm', 'gpu_vm_cuda_extra_releases', '13.0', 'a list of CUDA releases'),
    ('gpu_vm', 'gpu_vm_cuda_extra_releases', ['13'], '"MAJOR.MINOR"'),
    ('sglang', 'sglang_pip_extra_args', '--index-url x\n--pre', 'one line'),
    ('sglang', 'sglang_version', '0.5.9; rm -rf /', 'exact version'),
    ('sglang', 'sglang_version', '>=0.5', 'exact version'),
    ('sglang', 'sglang_torch_version', 2.9, 'exact version'),
    ('sglang', 'sglang_service_user', 'root', 'sglang_allow_root_service_user'),
    ('sglang', 'sglang_venvs_dir', 'venvs', 'absolute path'),
    ('sglang_server', 'sglang_server_api_key', SECRET, 'contains a quote'),
    ('sglang_server', 'sglang_server_api_key', 'abc\ndef', 'contains a line break'),
    ('sglang_server', 'sglang_server_api_key', ' abc', 'leading or trailing white space'),
    ('sglang_server', 'sglang_server_api_key', 'ab cd', 'white space'),
    ('sglang_server', 'sglang_server_api_key', 'abc\\def', 'backslash'),
    ('sglang_server', 'sglang_server_api_key', 'schlüssel', 'non-ASCII'),
    ('sglang_server', 'sglang_server_hf_token', "hf_'x", 'contains a quote'),
    ('sglang_server', 'sglang_server_hf_token', 12345, 'must be a string'),
    ('sglang_server', 'sglang_server_args', {'model-path': 'm', 'api-key': 'sk-123456'}, 'looks like a secret'),
    ('sglang_server', 'sglang_server_args', {'model-path': 'm', 'api': 'sk-123456'}, 'looks like a secret'),
    ('sglang_server', 'sglang_server_args', {'model-path': 'm', '--admin-api-key': 'sk-12345'}, 'looks like a secret'),
    ('sglang_server', 'sglang_server_args', {'model-path': 'm', 'served-model-name': 'x-lab-api-key-not-a-secret'},
     'contains sglang_server_api_key'),
    ('sglang_server', 'sglang_server_extra_args', {'hf-token': 'hf_123456'}, 'looks like a secret'),
    ('sglang_server', 'sglang_server_args', {'model-path': ''}, 'must name the model'),
    ('sglang_server', 'sglang_server_args', {'model': '  '}, 'must name the model'),
    ('sglang_server', 'sglang_server_extra_args', {'model-path': ''}, 'sglang_server_extra_args: model-path must name'),
    ('sglang_server', 'sglang_server_env', {'HF_TOKEN': 'hf_x'}, 'is a secret'),
    ('sglang_server', 'sglang_server_launch', 'sglang.launch_server',
     'sglang_server_launch: launch must be "python -m <module>" or "<console script> <subcommand>"'),
    ('sglang_server', 'sglang_server_launch', 'vllm serve', "got 'vllm serve'"),
    ('sglang_server', 'sglang_server_package', 'inferops.sim', 'sglang_server_package: the package that stands in'),
    ('sglang_server', 'sglang_server_env', {'1BAD': 'x'}, 'not a valid environment variable name'),
    ('sglang_server', 'sglang_server_env', {'BAD-NAME': 'x'}, 'not a valid environment variable name'),
    ('sglang_server', 'sglang_server_extra_env', {'A': 'one\ntwo'}, 'contains a line break'),
    ('sglang_server', 'sglang_server_extra_env', {'A': 'bell\x07'}, 'control character'),
    ('sglang_server', 'sglang_server_extra_env', {'A': {'nested': 1}}, 'must be a string or number'),
    ('sglang_server', 'sglang_server_extra_env', ['A=1'], 'must be a mapping'),
    ('sglang_server', 'sglang_server_service_user', 'root', 'sglang_server_allow_root: true'),
    ('sglang_server', 'sglang_server_unit_name', 'sglang.service', 'without ".service"'),
    ('sglang_server', 'sglang_server_unit_name', 'my unit', 'systemd unit name'),
    ('sglang_server', 'sglang_server_start_timeout', 0, 'seconds of at least 1'),
    ('sglang_server', 'sglang_server_health_interval', -5, 'seconds of at least 1'),
    ('sglang_server', 'sglang_server_health_timeout', 'soon', 'seconds of at least 1'),
    ('sglang_server', 'sglang_server_start_limit_burst', 0, 'at least 1'),
    ('sglang_server', 'sglang_server_limit_nofile', 10, 'at least 1024'),
    ('sglang_server', 'sglang_server_read_write_paths', ['relative/path'], 'absolute path'),
    ('sglang_server', 'sglang_server_config_dir', '', 'absolute path'),
    ('sglang_server', 'sglang_server_system_call_filter', ['@system-service\n'], 'one line'),
    ('sglang_server', 'sglang_server_model_revision', 'main', 'must be a commit'),
    ('sglang_server', 'sglang_server_model_revision', 'A' * 40, 'must be a commit'),
    ('sglang_server', 'sglang_server_weights_disk_margin', 'lots', 'neither bytes'),
    ('sglang_server', 'sglang_server_predownload_poll', 0, 'seconds of at least 1'),
    ('sglang_server', 'sglang_server_gpu_health_expected_gpus', 0, 'a GPU count of at least 1'),
    ('sglang_server', 'sglang_server_gpu_health_kernel_log_file', 'kernel.log', 'absolute path'),
]


@pytest.mark.parametrize('role, variable, value, words', BAD)
def test_bad_input_names_the_variable_and_what_to_change(role, variable, value, words):
    variables = dict(ROLES[role], **{variable: value})
    errors = role_input_errors(role, variables)
    assert len(errors) == 1, errors
    assert variable in errors[0]
    assert words in errors[0]


@pytest.mark.parametrize('value', [SECRET, 'abc\ndef', 'sk-123456', 'hf_123456', 'lab-api-key-not-a-secret'])
def test_no_message_shows_a_secret(value):
    variables = dict(SERVER, sglang_server_api_key=value, sglang_server_hf_token=value,
                     sglang_server_args={'model-path': 'm', 'api-key': value, 'x': 'pre' + value},
                     sglang_server_env={'HF_TOKEN': value})
    for error in role_input_errors('sglang_server', variables):
        assert value not in error
        assert value.splitlines()[0] not in error


def test_options_about_tokens_are_not_taken_for_secrets():
    args = {'model-path': 'm', 'max-total-tokens': 262144, 'max-prefill-tokens': 16384,
            'tokenizer-path': '/models/tokenizer', 'speculative-num-draft-tokens': 4}
    assert role_input_errors('sglang_server', dict(SERVER, sglang_server_args=args)) == []


def test_root_is_accepted_when_allowed_on_purpose():
    assert role_input_errors('sglang_server', dict(SERVER, sglang_server_service_user='root',
                                                   sglang_server_allow_root=True)) == []
    assert role_input_errors('sglang', dict(SGLANG, sglang_service_user='root',
                                            sglang_allow_root_service_user=True)) == []


def test_an_unknown_role_is_a_message_not_a_crash():
    assert role_input_errors('nope', {}) == ["no input checks are defined for role 'nope'"]
    assert role_input_errors('sglang', None) == ['the inputs of role sglang must be given as a mapping']


@pytest.mark.parametrize('value, ok', [
    (1, True), ('2', True), ('25%', True), ([1, '50%'], True), ('100%', True),
    (0, False), (-1, False), ('0', False), ('0%', False), ('150%', False), ('all', False), ([], False),
    (None, False), (True, False), (1.5, False),
])
def test_serial(value, ok):
    errors = serial('deploy_serial', value)
    assert (errors == []) is ok
    if not ok:
        assert 'deploy_serial' in errors[0]


@pytest.mark.parametrize('branch', ['570', 570, ' 570 '])
def test_a_driver_branch_typed_as_text_or_number_is_judged_by_the_release_set(branch):
    """`-e gpu_vm_driver_branch=570` (text) and `gpu_vm_driver_branch: 570` (YAML's number) are
    the same branch: the input check takes both, and the release set says why 570 is too old."""
    assert role_input_errors('sglang', dict(SGLANG, sglang_driver_branch=branch)) == []
    sets = yaml.safe_load(open(RELEASE_SETS))['_sglang_release_sets']
    errors = release_errors('0.5.23', sets, branch, None, '3.11.2')
    assert len(errors) == 1
    assert errors[0].startswith("sglang_release_set 0.5.23 needs NVIDIA driver branch 580 or later (CUDA 13.0), but the"
                                " node's driver is branch 570 (sglang_driver_branch is 570). Raise gpu_vm_driver_branch"
                                " to 580 or later")
