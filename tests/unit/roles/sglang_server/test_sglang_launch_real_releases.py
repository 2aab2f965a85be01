# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launcher's masking on the real code of SGLang 0.5.9 and 0.5.23, on the CPU.

A release's code that logs, serves and dumps its arguments only imports with the release's
dependencies (torch, transformers, fastapi...: some gigabytes), so these tests run where such
an environment is named, and are skipped elsewhere. Name one per release in
INFEROPS_SGLANG_RELEASES, as VERSION=PYTHON[:PATH...] separated by white space: the Python that
has the release's dependencies, and the paths to put before its own: cpu_stubs/ (0.5.9 imports
the GPU-only sgl_kernel), the unpacked wheel, and a folder with the few packages the server's
modules import that the Python lacks. They were run so with one Python 3.11 venv holding
0.5.23's dependencies (`pip install sglang==0.5.23`, its CUDA wheels unused) for both releases:

    INFEROPS_SGLANG_RELEASES="0.5.9=/tmp/msv/bin/python:$PWD/tests/unit/roles/sglang_server/cpu_stubs:/tmp/sgl-research/v059:/tmp/extra
                              0.5.23=/tmp/msv/bin/python:/tmp/sgl-research/v0523:/tmp/extra"

/tmp/extra: `pip install --target /tmp/extra --no-deps partial-json-parser uvicorn uvloop fastapi
opentelemetry-api setproctitle einops jsonschema jsonschema-specifications referencing rpds-py
xgrammar soundfile cffi pycparser python-multipart`.

The unit tests in test_sglang_launch.py run the same paths, as laid out in sglang_layouts.py,
everywhere.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, '..', '..', '..', '..', 'roles', 'sglang_server', 'files', 'sglang-launch')
PROBE = os.path.join(HERE, 'real_release_probe.py')
API_KEY = 'sk-real-release-Hq2x9K'
ADMIN_KEY = 'sk-real-admin-Pv6n3D'
# A model directory that ServerArgs accepts without a download: a config of a tiny Llama.
TINY_LLAMA = {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': 64,
              'num_attention_heads': 4, 'num_key_value_heads': 4, 'num_hidden_layers': 1,
              'intermediate_size': 128, 'vocab_size': 1000, 'max_position_embeddings': 512}


def release_environment(version):
    for entry in os.environ.get('INFEROPS_SGLANG_RELEASES', '').split():
        name, _equals, spec = entry.partition('=')
        if name == version:
            python, _colon, path = spec.partition(':')
            return python, path
    pytest.skip('no environment with SGLang %s named in INFEROPS_SGLANG_RELEASES' % version)


@pytest.mark.parametrize('version', ['0.5.9', '0.5.23'])
def test_the_keys_never_reach_the_log_server_info_or_dumps_of_the_real_release(tmp_path, version):
    python, path = release_environment(version)
    model = tmp_path / 'model'
    model.mkdir()
    (model / 'config.json').write_text(json.dumps(TINY_LLAMA))
    probe_dir = tmp_path / 'probe'
    probe_dir.mkdir()
    env = dict(os.environ, PYTHONPATH=path, HF_HUB_OFFLINE='1', SGLANG_PROBE_VERSION=version)
    check = subprocess.run([python, '-c', 'import sglang.version; print(sglang.version.__version__)'], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert check.stdout.strip() == version, check.stderr[-2000:]
    proc = subprocess.run([python, PROBE, LAUNCHER, str(probe_dir), str(model)], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=540, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    written = {}
    for folder, _dirs, files in os.walk(str(probe_dir)):
        for name in files:
            with open(os.path.join(folder, name), 'rb') as handle:
                written[os.path.relpath(os.path.join(folder, name), str(probe_dir))] = handle.read()
    # The request dump, and the crash dump in a folder of the host's name.
    assert 'requests.pkl' in written and any(name.startswith('probe/crash_dump_') for name in written)
    report = json.loads(written['report.json'])
    assert report['key_held'] and report['admin_key_held'] and report['launch_server_parses_argv']
    assert report['steps'][-2:] == ['http_server.server_info', 'TokenizerManager dumps']
    for key in (API_KEY, ADMIN_KEY):
        assert key not in proc.stdout + proc.stderr
        assert all(key.encode() not in data for data in written.values()), [n for n in written if key.encode()
                                                                            in written[n]]
    assert report['server_info']['api_key'] in ('<hidden>', '<redacted>')
    assert report['server_info']['admin_api_key'] in ('<hidden>', '<redacted>')
    assert 'server_args=' in proc.stderr and 'model_path' in proc.stderr
    assert '--api-key <hidden>' in ' '.join(report['argv'])
    if version == '0.5.23':
        assert '--api-key <hidden>' in report['launch_command']
        assert '--admin-api-key <hidden>' in report['server_info']['launch_command']
