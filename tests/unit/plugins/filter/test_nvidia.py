# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.filter.nvidia import FilterModule


@pytest.fixture
def filters():
    return FilterModule().filters()


def test_filters_are_exposed_under_their_documented_names(filters):
    assert set(filters) == {'cuda_repo_path', 'nvidia_driver_packages', 'nvidia_smi_listing_problems'}


def test_cuda_repo_path_filter(filters):
    assert filters['cuda_repo_path']('Ubuntu', '22.04', 'aarch64') == 'ubuntu2204/sbsa'


def test_filters_turn_bad_input_into_filter_errors(filters):
    with pytest.raises(AnsibleFilterError, match='Debian 13 is not supported'):
        filters['cuda_repo_path']('Debian', '13', 'x86_64')
    with pytest.raises(AnsibleFilterError, match='three digit branch'):
        filters['nvidia_driver_packages']('R580', 'Debian')


def test_the_listing_filter_reads_a_registered_command_result(filters):
    listed = {'rc': 0, 'stdout': '0, NVIDIA H200, 00000000:00:06.0', 'stderr': '', 'stdout_lines': ['x']}
    assert filters['nvidia_smi_listing_problems'](listed, '1', '60') == []
    assert 'expected 2' in filters['nvidia_smi_listing_problems'](listed, 2, 60)[0]
