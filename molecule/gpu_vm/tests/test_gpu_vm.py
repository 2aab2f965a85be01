# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""State of a lab node after gpu_vm converged."""
import os
import re

import pytest
import testinfra.utils.ansible_runner

from ansible_collections.inferops.serving.tests.utils.playbook import run_scenario_playbook

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(
    os.environ['MOLECULE_INVENTORY_FILE']).get_hosts('gpu_nodes')

DRIVER_PACKAGES = ['nvidia-driver-pinning-580', 'nvidia-kernel-open-dkms', 'nvidia-driver-cuda', 'nvidia-persistenced']
REPO_URL = 'http://127.0.0.1:8089/cuda/repos/debian12/x86_64/'


@pytest.fixture(autouse=True)
def journal_on_failure(request, host):
    yield
    report = getattr(request.node, 'rep_call', None)
    if report is not None and report.failed:
        print(host.run('journalctl --no-pager -n 50 -u nvidia-persistenced -u lab-cuda-repo').stdout)


@pytest.mark.parametrize('name', DRIVER_PACKAGES)
def test_driver_branch_packages_are_installed_and_held(host, name):
    package = host.package(name)
    assert package.is_installed
    if name != 'nvidia-driver-pinning-580':
        assert package.version.startswith('580.')
    selection = host.check_output('dpkg --get-selections %s', name).split()
    assert selection == [name, 'hold']


def test_only_open_kernel_modules_are_installed(host):
    assert not host.package('nvidia-kernel-dkms').is_installed


def test_branch_pin_is_in_place(host):
    pin = host.file('/etc/apt/preferences.d/nvidia-driver-pinning-580')
    assert pin.exists
    assert 'Pin: version 580.*' in pin.content_string


def test_cuda_repository_is_configured_once_with_signed_by(host):
    sources = host.run(
        "grep -rhE '^[^#]*%s' /etc/apt/sources.list /etc/apt/sources.list.d/ || true",
        re.escape(REPO_URL.split('://', 1)[1].rstrip('/')))
    lines = [line for line in sources.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, sources.stdout
    assert 'signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg' in lines[0]
    assert host.package('cuda-keyring').is_installed
    assert host.file('/usr/share/keyrings/cuda-archive-keyring.gpg').exists


def test_nouveau_is_blacklisted(host):
    conf = host.file('/etc/modprobe.d/blacklist-nouveau.conf')
    assert conf.exists
    assert re.search(r'^blacklist nouveau$', conf.content_string, re.M)
    assert re.search(r'^options nouveau modeset=0$', conf.content_string, re.M)


def test_nvidia_persistenced_is_enabled_and_running(host):
    service = host.service('nvidia-persistenced')
    assert service.is_enabled
    assert service.is_running


def test_nvcc_in_a_login_shell_is_cuda_12_8(host):
    result = host.run("su -s /bin/bash -l -c 'nvcc --version; echo CUDA_HOME=$CUDA_HOME' nobody")
    assert result.rc == 0, result.stderr
    assert 'Cuda compilation tools, release 12.8, V12.8.' in result.stdout
    assert 'CUDA_HOME=/usr/local/cuda-12.8' in result.stdout


def test_cuda_toolkit_without_driver_metapackage(host):
    assert host.package('cuda-toolkit-12-8').is_installed
    assert not host.package('cuda-drivers').is_installed
    assert host.file('/usr/local/cuda-12.8/lib64').is_directory


def test_the_vm_layer_knows_nothing_of_the_server(host):
    # The service user and the venv belong to the sglang role above.
    assert not host.user('sglang').exists
    assert not host.file('/opt/sglang').exists


def test_nvidia_smi_lists_8_gpus(host):
    gpus = host.check_output('nvidia-smi -L').splitlines()
    assert len(gpus) == 8
    assert all('RTX PRO 6000 Blackwell' in line for line in gpus)


def test_check_mode_on_the_converged_node_reports_no_change():
    run = run_scenario_playbook('--check', os.path.join(os.environ['MOLECULE_SCENARIO_DIRECTORY'], 'converge.yml'))
    assert run.returncode == 0, run.summary
    assert run.recap and all(recap.changed == 0 for recap in run.recap.values()), run.summary


def test_hand_made_repository_entries_are_gone(host):
    # prepare.yml left these behind, as the seed did.
    assert not host.file('/etc/apt/sources.list.d/cuda-seed.list').exists
    assert '8089/cuda/repos' not in host.file('/etc/apt/sources.list').content_string
