# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launcher's masking on the real code of SGLang 0.5.9 and 0.5.23, on the CPU.

The launcher runs as sglang.service runs it: the keys and the Hugging Face token in its
environment, `run` and the release's entry point (`python -m sglang.launch_server`, and for 0.5.23
`sglang serve`) on its command line. The release's own code parses the command line and builds
ServerArgs; where it would start the HTTP server and the GPU workers, the probe of
probe_site/real_release_probe.py goes through the release's code that logs, serves (/server_info)
and dumps the arguments, and waits while this test reads /proc/PID of the running server.

The releases are the wheels PyPI publishes (tests/unit/conftest.py pins them, with the packages
they import at start-up, and keeps them in the wheelhouse between runs); their GPU-only imports are
the stand-ins of cpu_stubs/sglang_cpu_stubs.py, as for the recorded parser verdicts. Without PyPI
the tests are skipped, and fail in CI.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json
import os
import subprocess
import time

import pytest

# The code under test runs on the node or is a third-party binary, not ansible-core: the
# ansible-core matrix (make core-matrix) leaves these tests out.
pytestmark = pytest.mark.no_ansible_core

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, '..', '..', '..', '..', 'roles', 'sglang_launcher', 'files', 'sglang-launch')
PROBE_SITE = os.path.join(HERE, 'probe_site')
SECRETS = {'SGLANG_API_KEY': 'sk-real-release-Hq2x9K', 'SGLANG_ADMIN_API_KEY': 'sk-real-admin-Pv6n3D',
           'HF_TOKEN': 'hf_realReleaseToken7Tq'}
# A model directory that ServerArgs accepts without a download: a config of a tiny Llama.
TINY_LLAMA = {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': 64,
              'num_attention_heads': 4, 'num_key_value_heads': 4, 'num_hidden_layers': 1,
              'intermediate_size': 128, 'vocab_size': 1000, 'max_position_embeddings': 512}
ENTRY_POINTS = [('0.5.9', ['sglang.launch_server']), ('0.5.23', ['sglang.launch_server']),
                ('0.5.23', ['sglang.cli.main:main', 'serve'])]


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def launch(tmp_path, release_path, version, entry):
    """Start the launcher as the unit does; return (pid, what /proc showed while it served, exit
    status, its output, the files the probe and the release wrote)."""
    model = tmp_path / 'model'
    model.mkdir()
    (model / 'config.json').write_text(json.dumps(TINY_LLAMA))
    probe_dir = tmp_path / 'probe'
    probe_dir.mkdir()
    private_tmp = tmp_path / 'tmp'
    private_tmp.mkdir()
    python, path = release_path(version)
    env = dict((name, value) for name, value in os.environ.items() if not name.startswith(('SGLANG_', 'HF_')))
    env.update(SECRETS, PYTHONPATH=os.pathsep.join([PROBE_SITE, path]), HF_HUB_OFFLINE='1',
               INFEROPS_PROBE_DIR=str(probe_dir), TMPDIR=str(private_tmp),
               # No py-spy or CUDA core dump after the crash dump (and no 5 s wait for them).
               SGLANG_PYSPY_DUMP_BEFORE_CRASH='false', SGLANG_CUDA_COREDUMP_BEFORE_CRASH='false')
    command = [python, LAUNCHER, 'run'] + entry + ['--model-path', str(model), '--device', 'cpu']
    with open(str(tmp_path / 'output.log'), 'w') as output:
        proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT,
                                cwd=str(tmp_path))
        seen = {}
        try:
            deadline = time.time() + 180
            while not (probe_dir / 'report.json').exists() and proc.poll() is None and time.time() < deadline:
                time.sleep(0.1)
            if proc.poll() is None:
                for name in ('cmdline', 'environ'):
                    with open('/proc/%d/%s' % (proc.pid, name), 'rb') as handle:
                        seen[name] = handle.read().decode('utf-8', 'replace')
            proc.stdin.close()
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    written = {}
    for folder in (probe_dir, private_tmp):
        for parent, _dirs, files in os.walk(str(folder)):
            for name in files:
                with open(os.path.join(parent, name), 'rb') as handle:
                    written[os.path.relpath(os.path.join(parent, name), str(tmp_path))] = handle.read()
    return proc, seen, (tmp_path / 'output.log').read_text(), written


@pytest.mark.parametrize('version, entry', ENTRY_POINTS, ids=['%s-%s' % (v, e[-1]) for v, e in ENTRY_POINTS])
def test_the_real_server_gets_the_keys_no_command_line_environment_log_or_dump_shows(tmp_path, sglang_release,
                                                                                     version, entry):
    proc, seen, output, written = launch(tmp_path, sglang_release, version, entry)
    assert proc.returncode == 0 and 'report.json' in ' '.join(written), output[-4000:]
    report = json.loads(written['probe/report.json'])
    # The process the launcher started, while it served: /proc/PID of the server itself.
    assert report['pid'] == proc.pid
    assert 'sglang-launch' in seen['cmdline'] and entry[0] in seen['cmdline']
    for name, secret in SECRETS.items():
        assert secret not in seen['cmdline'] and secret not in seen['environ'], name
        assert secret not in output, name
        assert secret not in ' '.join(report['argv']), name
    # The release's own parser received the keys, from the command line the launcher built inside the process.
    assert report['api_key_sha256'] == sha256(SECRETS['SGLANG_API_KEY'])
    assert report['admin_api_key_sha256'] == sha256(SECRETS['SGLANG_ADMIN_API_KEY'])
    assert '--api-key <hidden>' in ' '.join(report['argv'])
    # The token reaches huggingface_hub (and the workers) only as the path of a 0600 file in the
    # unit's private /tmp.
    assert report['hf_token_path'].startswith(str(tmp_path / 'tmp')) and report['hf_token_mode'] == '0o600'
    assert report['hf_token_sha256'] == sha256(SECRETS['HF_TOKEN'])
    # What the release logs, serves and dumps of its arguments, the key masked.
    assert 'server_args=' in output and 'model_path' in output
    assert report['server_info']['api_key'] in ('<hidden>', '<redacted>')
    assert report['server_info']['admin_api_key'] in ('<hidden>', '<redacted>')
    assert 'probe/requests.pkl' in written and any(name.startswith('probe/probe/crash_dump_') for name in written)
    for name, data in written.items():
        for variable in ('SGLANG_API_KEY', 'SGLANG_ADMIN_API_KEY'):
            assert SECRETS[variable].encode() not in data, (variable, name)
    if version == '0.5.23':
        assert '--api-key <hidden>' in report['launch_command']
        assert '--admin-api-key <hidden>' in report['server_info']['launch_command']
