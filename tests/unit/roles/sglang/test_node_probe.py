# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang role's one read of the node before it checks the release set (_sglang_node_probe in
vars/main.yml): its python3 version and the driver nvidia-smi reports, run as the role runs it."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))

with open(os.path.join(REPO, 'roles', 'sglang', 'vars', 'main.yml')) as handle:
    PROBE = yaml.safe_load(handle)['_sglang_node_probe']

# The code under test runs on the node: the ansible-core matrix (make core-matrix) leaves it out.
pytestmark = pytest.mark.no_ansible_core


def probe(tmp_path, smi_body, what='driver', code=PROBE):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / 'nvidia-smi'
    smi.write_text('#!%s\n%s' % (sys.executable, smi_body))
    smi.chmod(0o755)
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ['PATH']]))
    done = subprocess.run([sys.executable, '-c', code, what], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_driver_nvidia_smi_reports_and_the_python_version(tmp_path):
    answer = probe(tmp_path, 'print("580.159.04")\n')
    assert answer['driver'].strip() == '580.159.04'
    assert answer['python'] == '%d.%d.%d' % sys.version_info[:3]


def test_the_driver_is_not_asked_when_the_role_knows_it(tmp_path):
    assert probe(tmp_path, 'raise SystemExit("asked")\n', what='python')['driver'] == ''


def test_an_nvidia_smi_stuck_in_the_driver_is_left_behind_and_no_driver_answers(tmp_path):
    """Its output is held by a process in a session of its own, which no kill of nvidia-smi reaches: what a
    stuck driver gives. The probe's 60 s bound is shortened here to 2 s."""
    pid_file = tmp_path / 'holder.pid'
    body = ("import subprocess, sys, time\n"
            "holder = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
            "open(%r, 'w').write(str(holder.pid))\ntime.sleep(600)\n" % str(pid_file))
    assert 'timeout=60' in PROBE
    started = time.time()
    try:
        answer = probe(tmp_path, body, code=PROBE.replace('timeout=60', 'timeout=2'))
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert answer['driver'] == '' and time.time() - started < 30
