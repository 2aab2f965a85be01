# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node without NVIDIA GPUs: gpu_vm's preflight stopped before any change."""
import os

import testinfra.utils.ansible_runner

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(
    os.environ['MOLECULE_INVENTORY_FILE']).get_hosts('gpu_nodes')


def test_the_simulated_pci_bus_has_no_nvidia_device(host):
    vendors = host.check_output('cat /opt/inferops-lab/sys-no-gpu/bus/pci/devices/*/vendor').split()
    assert vendors, 'the simulated PCI tree is empty'
    assert '0x10de' not in vendors


def test_no_nvidia_or_cuda_package_was_installed(host):
    installed = host.check_output("dpkg-query -W -f='${Package} ${Status}\\n'").splitlines()
    names = [line.split()[0] for line in installed if line.endswith(' ok installed')]
    assert [name for name in names if 'nvidia' in name or name.startswith('cuda')] == []


def test_no_cuda_apt_source_or_key_was_added(host):
    sources = host.run('grep -rl "cuda/repos" /etc/apt/sources.list /etc/apt/sources.list.d/')
    assert sources.stdout.strip() == ''
    assert not host.file('/usr/share/keyrings/cuda-archive-keyring.gpg').exists


def test_no_service_user_or_venv_was_created(host):
    assert not host.user('sglang').exists
    assert not host.file('/opt/sglang').exists
    assert not host.file('/etc/modprobe.d/blacklist-nouveau.conf').exists
