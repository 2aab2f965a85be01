# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collector's unit as Ansible renders it (trim_blocks): every setting on a line of its own."""
import os

import jinja2
import pytest

TEMPLATE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'node_metrics', 'templates',
                        'inferops-gpu-metrics.service.j2')


@pytest.mark.parametrize('expected_gpus, health_url', [(0, ''), (8, ''), (8, 'http://127.0.0.1:8000/health')])
def test_exec_start_is_one_line_and_the_next_setting_starts_its_own(expected_gpus, health_url):
    environment = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    environment.filters['comment'] = lambda text: '# ' + text
    with open(TEMPLATE) as handle:
        text = environment.from_string(handle.read()).render(
            ansible_managed='managed', _node_metrics_collector_dir='/usr/local/lib/c', node_metrics_textfile_dir='/t',
            node_metrics_nvidia_smi='/usr/bin/nvidia-smi', node_metrics_kernel_log_command='journalctl -k',
            node_metrics_history_path='/h', node_metrics_sglang_health_url=health_url, node_metrics_timeout=4,
            node_metrics_gpu_expected_count=expected_gpus)
    lines = text.splitlines()
    exec_start = [line for line in lines if line.startswith('ExecStart=')]
    assert len(exec_start) == 1 and exec_start[0].endswith('--timeout 4')
    assert ('--expected-gpus 8' in exec_start[0]) == (expected_gpus == 8)
    # Four sources of 4 s, each with the collector's two grace periods to kill one that hangs: systemd ends
    # the run only after the collector would have ended it itself.
    assert any(line == 'TimeoutStartSec=36' for line in lines)
