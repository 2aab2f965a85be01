# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_vm's preflight rendered with Ubuntu and Debian facts.

Ubuntu cannot run in the lab, so what depends on Ubuntu facts (repository
path, package names, headers) is checked by running the preflight on this
machine with those facts injected, against a simulated sysfs PCI tree.
"""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import ANSIBLE_PLAYBOOK, run_playbook

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
MAKE_SYSFS = os.path.join(REPO_ROOT, 'molecule', 'resources', 'lab', 'sim', 'make-sysfs.py')

pytestmark = pytest.mark.skipif(
    not (os.path.exists(ANSIBLE_PLAYBOOK) and os.path.exists(MAKE_SYSFS)),
    reason='needs ansible-playbook next to the test interpreter and the lab sysfs generator')

UBUNTU_2404 = {
    'distribution': 'Ubuntu', 'distribution_version': '24.04', 'distribution_major_version': '24',
    'architecture': 'x86_64', 'kernel': '6.8.0-51-generic',
    'virtualization_role': 'guest', 'virtualization_type': 'kvm',
}


def facts(**override):
    result = dict(UBUNTU_2404)
    result.update(override)
    return result


@pytest.fixture(scope='module')
def sysfs(tmp_path_factory):
    roots = {}
    for gpus in (0, 8):
        root = str(tmp_path_factory.mktemp('sys%d' % gpus))
        subprocess.run([sys.executable, MAKE_SYSFS, root, '--gpus', str(gpus)], check=True, capture_output=True)
        roots[gpus] = root
    return roots


def render(tmp_path, host_facts, sysfs_root, **role_vars):
    out = tmp_path / 'render.json'
    extra = {
        'render_facts': host_facts,
        'render_out': str(out),
        'gpu_vm_sysfs_root': sysfs_root,
        'ansible_python_interpreter': sys.executable,
    }
    extra.update(role_vars)
    result = run_playbook(['-i', 'testhost,', '-c', 'local', os.path.join(HERE, 'render.yml'), '-e', json.dumps(extra)])
    rendered = json.loads(out.read_text()) if result.returncode == 0 else None
    return result, rendered


@pytest.mark.parametrize('host_facts, repo_path, headers', [
    (facts(), 'ubuntu2404/x86_64', ['linux-headers-6.8.0-51-generic']),
    (facts(distribution_version='22.04', distribution_major_version='22', kernel='5.15.0-131-generic'),
     'ubuntu2204/x86_64', ['linux-headers-5.15.0-131-generic']),
    (facts(architecture='aarch64', kernel='6.8.0-51-generic-64k'),
     'ubuntu2404/sbsa', ['linux-headers-6.8.0-51-generic-64k']),
    (facts(distribution='Debian', distribution_version='12.9', distribution_major_version='12',
           kernel='6.1.0-31-amd64'),
     'debian12/x86_64', ['linux-headers-6.1.0-31-amd64', 'linux-headers-amd64']),
])
def test_repository_and_headers_follow_the_facts(tmp_path, sysfs, host_facts, repo_path, headers):
    result, rendered = render(tmp_path, host_facts, sysfs[8])
    assert result.returncode == 0, result.summary
    base = 'https://developer.download.nvidia.com/compute/cuda/repos/' + repo_path
    assert rendered['repo_url'] == base + '/'
    assert rendered['keyring_url'] == base + '/cuda-keyring_1.1-1_all.deb'
    assert rendered['kernel_headers'] == headers
    assert rendered['expected_gpus'] == 8
    assert rendered['in_container'] is False


def test_ubuntu_gets_the_branch_suffixed_open_driver(tmp_path, sysfs):
    result, rendered = render(tmp_path, facts(), sysfs[8])
    assert result.returncode == 0, result.summary
    assert rendered['driver']['pinning'] == 'nvidia-driver-pinning-580'
    assert 'nvidia-dkms-580-open' in rendered['driver']['driver']


def test_lab_overrides_move_both_urls(tmp_path, sysfs):
    result, rendered = render(tmp_path, facts(distribution='Debian', distribution_version='12.9',
                                              distribution_major_version='12',
                                              virtualization_type='docker'),
                              sysfs[8], gpu_vm_cuda_repo_base_url='http://127.0.0.1:8089/cuda/repos/')
    assert result.returncode == 0, result.summary
    assert rendered['repo_url'] == 'http://127.0.0.1:8089/cuda/repos/debian12/x86_64/'
    assert rendered['keyring_url'] == 'http://127.0.0.1:8089/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb'
    assert rendered['in_container'] is True


def test_expected_gpu_count_overrides_the_pci_count(tmp_path, sysfs):
    result, rendered = render(tmp_path, facts(), sysfs[8], gpu_vm_expected_gpu_count=4)
    assert result.returncode == 0, result.summary
    assert rendered['expected_gpus'] == 4


def test_no_gpu_on_the_pci_bus_stops_with_a_passthrough_hint(tmp_path, sysfs):
    result, rendered = render(tmp_path, facts(), sysfs[0])
    assert result.returncode != 0
    assert rendered is None
    assert len(result.failures('testhost')) == 1, result.summary
    assert 'No NVIDIA display/3D controller' in result.failures('testhost')[0], result.summary
    assert 'Pass the GPUs through' in result.failures('testhost')[0], result.summary


def test_force_accepts_a_node_without_gpus(tmp_path, sysfs):
    result, rendered = render(tmp_path, facts(), sysfs[0], gpu_vm_force=True)
    assert result.returncode == 0, result.summary
    assert rendered['expected_gpus'] == 0


@pytest.mark.parametrize('override, message', [
    ({'distribution_version': '20.04', 'distribution_major_version': '20'}, 'Ubuntu 20.04 on x86_64'),
    ({'architecture': 'ppc64le'}, 'Ubuntu 24.04 on ppc64le'),
    ({'distribution': 'Rocky', 'distribution_version': '9.4', 'distribution_major_version': '9'}, 'Rocky 9.4'),
])
def test_unsupported_systems_fail_before_any_change(tmp_path, sysfs, override, message):
    result, rendered = render(tmp_path, facts(**override), sysfs[8])
    assert result.returncode != 0
    assert rendered is None
    assert len(result.failures('testhost')) == 1, result.summary
    assert 'gpu_vm supports Ubuntu 22.04, Ubuntu 24.04 and Debian 12' in result.failures('testhost')[0], result.summary
    assert message in result.failures('testhost')[0], result.summary
