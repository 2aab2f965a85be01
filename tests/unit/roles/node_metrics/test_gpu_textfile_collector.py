# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collector the node_metrics role installs, run as its systemd unit runs it."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import yaml

# The code under test runs on the node or is a third-party binary, not ansible-core: the
# ansible-core matrix (make core-matrix) leaves these tests out.
pytestmark = pytest.mark.no_ansible_core

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
COLLECTOR = os.path.join(REPO, 'roles', 'node_metrics', 'files', 'gpu_textfile_collector.py')
LAB_NVIDIA_SMI = os.path.join(REPO, 'molecule', 'resources', 'lab', 'sim', 'nvidia-smi')

KERNEL_LOG = "[ 1843.101203] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n"
HISTORY = json.dumps({'ts': '2026-02-19T13:53:43Z', 'epoch': 1771509223.0, 'event': 'benchmark', 'node': 'gpu-node',
                      'experiment': None, 'metrics': {'output_throughput': 1867.4, 'concurrency': 64}}) + '\n'


@pytest.fixture()
def health_server():
    status = {'code': 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(status['code'] if self.path == '/health' else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d/health' % server.server_address[1], status
    server.shutdown()


def run(tmp_path, nvidia_smi, health_url, env=None, python=(sys.executable, COLLECTOR), kernel_log=KERNEL_LOG,
        extra=()):
    (tmp_path / 'kern.log').write_text(kernel_log)
    (tmp_path / 'history.jsonl').write_text(HISTORY)
    (tmp_path / 'textfile').mkdir(exist_ok=True)
    output = tmp_path / 'textfile' / 'inferops_gpu.prom'
    argv = list(python) + ['--output', str(output), '--nvidia-smi', nvidia_smi,
                           '--kernel-log-command', 'cat %s' % (tmp_path / 'kern.log'),
                           '--history', str(tmp_path / 'history.jsonl'), '--health-url', health_url, '--timeout', '5']
    argv += list(extra)
    environment = dict(os.environ, PYTHONPATH=os.path.join(REPO, '.collections'), **(env or {}))
    result = subprocess.run(argv, capture_output=True, text=True, env=environment, check=False)
    assert result.returncode == 0, result.stderr
    return output.read_text(), sorted(os.listdir(str(tmp_path / 'textfile'))), result.stderr


def test_the_collector_writes_gpus_xids_health_and_baseline(tmp_path, health_server):
    url, _status = health_server
    load = tmp_path / 'load.json'
    load.write_text(json.dumps({'power_w': 250, 'util_pct': 35}))
    text, files, _stderr = run(tmp_path, LAB_NVIDIA_SMI, url, {'INFEROPS_LAB_GPU_LOAD': str(load)})
    lines = text.splitlines()
    assert files == ['inferops_gpu.prom']
    assert 'inferops_gpu_query_success 1' in lines
    assert sum(1 for line in lines if line.startswith('inferops_gpu_power_draw_watts{')) == 8
    assert 'inferops_gpu_power_draw_watts{gpu="2",bus_id="0000:03:00.0",name="NVIDIA RTX PRO 6000 Blackwell Server Edition"} 250.0' in lines
    assert 'inferops_gpu_xid_errors_total{gpu="2",bus_id="0000:03:00.0",xid="79"} 1' in lines
    # The GPU health gate's verdict on the same readings: Xid 79 asks for a reboot.
    assert 'inferops_gpu_healthy 0' in lines
    assert [line for line in lines if line.startswith('inferops_gpu_health_problem{')] == [
        'inferops_gpu_health_problem{gpu="2",bus_id="0000:03:00.0",check="xid",action="reboot"} 1']
    assert 'inferops_sglang_health_up 1' in lines
    assert 'inferops_sglang_baseline_output_throughput_tokens_per_second 1867.4' in lines


def test_a_failing_nvidia_smi_and_health_are_reported_as_zero(tmp_path, health_server):
    url, status = health_server
    status['code'] = 503
    text, files, stderr = run(tmp_path, '/nonexistent/nvidia-smi', url)
    lines = text.splitlines()
    assert 'inferops_gpu_query_success 0' in lines
    assert 'inferops_sglang_health_up 0' in lines
    assert 'inferops_gpu_healthy 0' in lines
    assert not [line for line in lines if line.startswith('inferops_gpu_power')]
    assert 'cannot run /nonexistent/nvidia-smi' in stderr
    assert files == ['inferops_gpu.prom']


def test_an_nvidia_smi_stuck_in_the_driver_replaces_the_last_readings_with_zero_in_bounded_time(tmp_path, health_server):
    """nvidia-smi on a GPU that fell off the bus never answers and survives being killed: here a process in
    a session of its own holds its output open, which the kill of nvidia-smi's group does not reach."""
    url, _status = health_server
    text, _files, _stderr = run(tmp_path, LAB_NVIDIA_SMI, url)
    assert 'inferops_gpu_query_success 1' in text.splitlines()
    pid_file = tmp_path / 'holder.pid'
    stuck = tmp_path / 'nvidia-smi'
    stuck.write_text("#!%s\nimport subprocess, sys, time\n"
                     "holder = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
                     "start_new_session=True)\nopen(%r, 'w').write(str(holder.pid))\ntime.sleep(600)\n"
                     % (sys.executable, str(pid_file)))
    stuck.chmod(0o755)
    started = time.time()
    try:
        text, files, stderr = run(tmp_path, str(stuck), url)
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    # One bound of 5 s and its two grace periods: -q -x is not asked of a driver that did not answer.
    assert time.time() - started < 15
    lines = text.splitlines()
    assert 'inferops_gpu_query_success 0' in lines and 'inferops_gpu_healthy 0' in lines
    assert not [line for line in lines if line.startswith('inferops_gpu_power')]
    assert stderr.count('did not answer within 5 s and did not end when killed') == 1
    assert files == ['inferops_gpu.prom']


def installed_like_the_role(tmp_path):
    """The collector and the module_utils files the role copies, laid out as on the node, and nothing else."""
    with open(os.path.join(REPO, 'roles', 'node_metrics', 'vars', 'main.yml')) as handle:
        names = yaml.safe_load(handle)['_node_metrics_module_utils']
    folder = tmp_path / 'collector'
    module_utils = folder / 'lib' / 'ansible_collections' / 'inferops' / 'serving' / 'plugins' / 'module_utils'
    for name in names:
        (module_utils / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(REPO, 'plugins', 'module_utils', name), str(module_utils / name))
    shutil.copy(COLLECTOR, str(folder))
    return str(folder / 'gpu_textfile_collector.py')


def test_the_files_the_role_installs_are_all_the_collector_imports(tmp_path, health_server):
    url, _status = health_server
    collector = installed_like_the_role(tmp_path)
    # -I -S: neither PYTHONPATH nor site-packages, so a module the role does not copy is missed here.
    text, _files, _stderr = run(tmp_path, LAB_NVIDIA_SMI, url, python=(sys.executable, '-I', '-S', collector))
    assert 'inferops_gpu_query_success 1' in text.splitlines()


def test_the_gpu_health_verdict_follows_the_faults_the_lab_plants(tmp_path, health_server):
    url, _status = health_server
    faults = tmp_path / 'faults.json'
    faults.write_text('{}')
    env = {'INFEROPS_LAB_GPU_FAULTS': str(faults), 'INFEROPS_LAB_GPU_COUNT': '8'}
    text, _files, _stderr = run(tmp_path, LAB_NVIDIA_SMI, url, env, kernel_log='', extra=['--expected-gpus', '8'])
    assert 'inferops_gpu_healthy 1' in text.splitlines()
    assert 'inferops_gpu_health_problem' not in text

    faults.write_text(json.dumps({'1': {'row_remapping': 'failed'}, '6': {'missing': True}}))
    text, _files, _stderr = run(tmp_path, LAB_NVIDIA_SMI, url, env, kernel_log='', extra=['--expected-gpus', '8'])
    lines = text.splitlines()
    assert 'inferops_gpu_healthy 0' in lines
    assert [line for line in lines if line.startswith('inferops_gpu_health_problem{')] == [
        'inferops_gpu_health_problem{gpu="1",bus_id="0000:02:00.0",check="row_remapping_failure",action="replace"} 1',
        'inferops_gpu_health_problem{gpu="",bus_id="",check="gpu_count",action="reboot"} 1']
