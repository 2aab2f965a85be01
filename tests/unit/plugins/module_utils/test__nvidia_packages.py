# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
import pytest

from ansible_collections.inferops.serving.plugins.module_utils._nvidia_packages import (
    NvidiaPackagesError,
    cuda_repo_path,
    driver_packages,
)


@pytest.mark.parametrize(
    'distribution, version, architecture, expected',
    [
        ('Ubuntu', '22.04', 'x86_64', 'ubuntu2204/x86_64'),
        ('Ubuntu', '24.04', 'x86_64', 'ubuntu2404/x86_64'),
        ('Ubuntu', '24.04', 'aarch64', 'ubuntu2404/sbsa'),
        ('Debian', '12', 'x86_64', 'debian12/x86_64'),
        # Debian facts carry the point release; the repository does not.
        ('Debian', '12.8', 'x86_64', 'debian12/x86_64'),
        ('Debian', '12.11', 'aarch64', 'debian12/sbsa'),
    ],
)
def test_cuda_repo_path_matches_nvidia_layout(distribution, version, architecture, expected):
    assert cuda_repo_path(distribution, version, architecture) == expected


@pytest.mark.parametrize(
    'distribution, version, architecture, message',
    [
        ('Ubuntu', '20.04', 'x86_64', '20.04 is not supported'),
        ('Debian', '11.9', 'x86_64', '11.9 is not supported'),
        ('Rocky', '9.4', 'x86_64', "unsupported distribution 'Rocky'"),
        ('Ubuntu', '24.04', 'ppc64le', "unsupported architecture 'ppc64le'"),
        # The repository folder is "sbsa"; nobody should pass it through unmapped.
        ('Ubuntu', '24.04', 'arm64', "unsupported architecture 'arm64'"),
    ],
)
def test_cuda_repo_path_rejects_what_nvidia_does_not_publish(distribution, version, architecture, message):
    with pytest.raises(NvidiaPackagesError, match=message):
        cuda_repo_path(distribution, version, architecture)


def test_ubuntu_r580_uses_branch_suffixed_open_packages():
    packages = driver_packages('580', 'Ubuntu')
    assert packages['pinning'] == 'nvidia-driver-pinning-580'
    assert packages['driver'] == [
        'nvidia-dkms-580-open', 'libnvidia-compute-580', 'nvidia-utils-580', 'nvidia-compute-utils-580']


@pytest.mark.parametrize('branch', ['590', '610'])
def test_ubuntu_from_590_drops_the_branch_from_names_but_keeps_the_pin(branch):
    packages = driver_packages(branch, 'Ubuntu')
    assert packages['pinning'] == 'nvidia-driver-pinning-%s' % branch
    assert packages['driver'] == ['nvidia-dkms-open', 'libnvidia-compute', 'nvidia-utils', 'nvidia-compute-utils']
    assert not any(branch in name for name in packages['driver'])


@pytest.mark.parametrize('branch', ['570', '580', 580, '590'])
def test_debian_names_never_carry_the_branch(branch):
    packages = driver_packages(branch, 'Debian')
    assert packages['pinning'] == 'nvidia-driver-pinning-%s' % branch
    assert packages['driver'] == ['nvidia-kernel-open-dkms', 'nvidia-driver-cuda', 'nvidia-persistenced']


@pytest.mark.parametrize('distribution', ['Ubuntu', 'Debian'])
def test_only_open_kernel_modules_are_selected(distribution):
    # Blackwell GPUs fail with the proprietary modules (RmInitAdapter).
    modules = [name for name in driver_packages('580', distribution)['driver'] if 'dkms' in name]
    assert modules and all('open' in name for name in modules)


@pytest.mark.parametrize('branch', ['58', '580.95', 'r580', '', 'latest'])
def test_driver_packages_rejects_non_branch_input(branch):
    with pytest.raises(NvidiaPackagesError, match='three digit branch number'):
        driver_packages(branch, 'Ubuntu')


def test_driver_packages_rejects_unknown_distribution():
    with pytest.raises(NvidiaPackagesError, match="unsupported distribution 'Fedora'"):
        driver_packages('580', 'Fedora')
