# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module against the lab's Hub stand-in over real HTTP. The download is a small stand-in of
`hf download` that writes huggingface_hub's cache layout; the molecule scenario `weights` runs
the real one."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import socket
import subprocess
import sys
import time

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
MODULE = os.path.join(REPO_ROOT, 'plugins', 'modules', 'model_weights.py')
HUB_SIM = os.path.join(REPO_ROOT, 'molecule', 'resources', 'lab', 'hub_sim', 'hub_sim.py')
REPO = 'inferops-lab/tiny-model'
SHARD_2 = 'model-00002-of-00002.safetensors'

FAKE_HF = r'''#!%s
import json, os, sys, urllib.request
repo, commit, cache = sys.argv[2], sys.argv[4], sys.argv[6]
endpoint = os.environ['HF_ENDPOINT']
listing = json.load(urllib.request.urlopen('%%s/api/models/%%s/revision/%%s' %% (endpoint, repo, commit)))
folder = os.path.join(cache, 'models--' + repo.replace('/', '--'))
for name in [s['rfilename'] for s in listing['siblings']]:
    os.makedirs(os.path.join(folder, 'blobs'), exist_ok=True)
    os.makedirs(os.path.join(folder, 'snapshots', commit), exist_ok=True)
    link = os.path.join(folder, 'snapshots', commit, name)
    if os.path.lexists(link):
        continue
    request = urllib.request.Request('%%s/%%s/resolve/%%s/%%s' %% (endpoint, repo, commit, name))
    etag = urllib.request.urlopen(urllib.request.Request(request.full_url, method='HEAD')).headers['ETag'].strip('"')
    partial = os.path.join(folder, 'blobs', etag + '.incomplete')
    if os.path.exists(partial):
        request.add_header('Range', 'bytes=%%d-' %% os.path.getsize(partial))
    with open(partial, 'ab') as handle:
        handle.write(urllib.request.urlopen(request).read())
    os.rename(partial, os.path.join(folder, 'blobs', etag))
    os.symlink(os.path.join('..', '..', 'blobs', etag), link)
''' % sys.executable


@pytest.fixture(scope='module')
def hub(tmp_path_factory):
    state = tmp_path_factory.mktemp('hub')
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, HUB_SIM, '--port', str(port), '--state-dir', str(state),
                               '--shard-size', '4096', '--last-shard-size', '8192'])
    endpoint = 'http://127.0.0.1:%d' % port
    for _attempt in range(100):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    yield {'endpoint': endpoint, 'state': state}
    server.terminate()
    server.wait()


@pytest.fixture
def weights(run_module, hub, tmp_path):
    hf = tmp_path / 'hf'
    hf.write_text(FAKE_HF)
    hf.chmod(0o755)
    (hub['state'] / 'requests.log').write_text('')

    def run(**args):
        defaults = dict(repo_id=REPO, endpoint=hub['endpoint'], cache_dir=str(tmp_path / 'hub'), hf_cli=str(hf),
                        record=str(tmp_path / 'record.json'), progress_path=str(tmp_path / 'progress'),
                        download_log=str(tmp_path / 'download.log'))
        defaults.update(args)
        return run_module(**defaults)
    return run


def _downloads(hub):
    return [line for line in (hub['state'] / 'requests.log').read_text().splitlines()
            if line.startswith('GET') and '/resolve/' in line]


def test_downloads_verifies_and_a_rerun_changes_nothing(weights, hub, tmp_path):
    first = weights()
    assert first['changed'] and first['verified'] and len(first['fetch']) == 4
    assert first['hashed'] == ['model-00001-of-00002.safetensors', SHARD_2]
    assert (tmp_path / 'progress').read_text().endswith('(100%)\n')
    assert len(_downloads(hub)) == 4
    again = weights()
    assert not again['changed'] and again['verified'] and again['fetch'] == [] and again['problems'] == []
    # The record spares the hashing, and nothing was downloaded again.
    assert again['hashed'] == [] and len(_downloads(hub)) == 4
    assert weights(state='verified')['verified']


def test_check_mode_reports_the_download_and_changes_nothing(weights, tmp_path):
    result = weights(_ansible_check_mode=True)
    assert result['changed'] and len(result['fetch']) == 4 and not (tmp_path / 'hub').exists()


def test_a_truncated_shard_is_replaced(weights, tmp_path):
    snapshot = weights()['snapshot']
    blob = os.path.realpath(os.path.join(snapshot, SHARD_2))
    os.truncate(blob, 100)
    failed = weights(state='verified')
    assert failed['failed'] and '%s has 100 bytes, the Hub states' % SHARD_2 in failed['msg']
    fixed = weights()
    assert fixed['changed'] and fixed['fetch'] == [SHARD_2] and blob in fixed['removed']
    assert os.path.getsize(blob) > 100


def test_an_interrupted_download_is_resumed_and_orphans_are_removed(weights, hub, tmp_path):
    snapshot = weights()['snapshot']
    blob = os.path.realpath(os.path.join(snapshot, SHARD_2))
    with open(blob, 'rb') as handle:
        half = handle.read()[:4000]
    os.unlink(blob)
    os.unlink(os.path.join(snapshot, SHARD_2))
    with open(blob + '.incomplete', 'wb') as handle:
        handle.write(half)
    orphan = os.path.join(os.path.dirname(blob), '0' * 64 + '.incomplete')
    open(orphan, 'w').close()
    result = weights()
    assert result['verified'] and result['removed'] == [orphan]
    assert any(line.endswith('bytes=4000-') for line in _downloads(hub))


def test_too_little_disk_is_refused_before_any_download(weights, hub):
    result = weights(disk_margin='1000TB', margin_name='sglang_server_weights_disk_margin')
    assert result['failed'] and 'Not enough free space' in result['msg']
    assert 'sglang_server_weights_disk_margin' in result['msg'] and _downloads(hub) == []


def test_a_wrong_hash_never_stays_in_the_cache(weights, tmp_path):
    result = weights(repo_id='inferops-lab/tiny-model-bad-hash')
    assert result['failed'] and '%s has sha256' % SHARD_2 in result['msg']
    assert not os.path.lexists(os.path.join(result['snapshot'], SHARD_2))
    # Without the hash check the size alone decides.
    assert weights(repo_id='inferops-lab/tiny-model-bad-hash', verify_sha256=False)['verified']


def test_a_shard_missing_from_the_repository_fails(weights):
    result = weights(repo_id='inferops-lab/tiny-model-missing-shard')
    assert result['failed'] and 'model-00003-of-00003.safetensors is listed in' in result['msg']


def test_an_unknown_revision_says_so_and_never_shows_the_token(weights, tmp_path, monkeypatch):
    monkeypatch.setenv('HF_TOKEN', 'hf_doNotShow123')
    result = weights(revision='0' * 40)
    assert result['failed'] and 'Cannot read the files of %s at %s' % (REPO, '0' * 40) in result['msg']
    assert 'hf_doNotShow123' not in json.dumps(result)
