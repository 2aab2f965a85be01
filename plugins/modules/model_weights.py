#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: model_weights
short_description: Model weights in the Hugging Face cache, downloaded at a pinned commit and verified
version_added: 0.3.0
description:
  - Asks the Hub (O(endpoint)) for the repository's files at O(revision), with the size of each
    and the sha256 of each LFS file, and compares them with the Hugging Face cache in O(cache_dir)
    (C(models--org--name/snapshots/<commit>/)).
  - A file is verified when it is present with the size the Hub states and, with
    O(verify_sha256=true), the sha256 the Hub states. Every shard that
    C(model.safetensors.index.json) lists must be a file of the repository. Hashes are computed once
    and kept in O(record) with each file's size and modification time, so a rerun does not read
    hundreds of GB again.
  - With O(state=verified), only checks, and fails naming every file that is not verified.
  - With O(state=present), refuses before downloading when the free space of the cache's file
    system is below the bytes to download plus O(disk_margin), naming both figures; removes files
    with a wrong size or hash and orphaned C(*.incomplete) files (a download of another revision
    that never finished); runs the real C(hf download --revision) of O(hf_cli), which resumes an
    interrupted download from its C(*.incomplete) file; then verifies again. A file that still
    fails is removed from the cache, and the module fails, so the model never reaches a server.
  - While the download runs, O(progress_path) says how many bytes of the total are there.
  - The token comes from the environment, as C(hf) reads it (C(HF_TOKEN), or the file
    C(HF_TOKEN_PATH) names); it is never returned or logged.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  repo_id:
    description: The model repository on the Hub, V(org/name).
    type: str
    required: true
  revision:
    description:
      - The commit to download and verify (40 hexadecimal characters). A branch name is resolved
        to its commit by the Hub at every run, so the files may change under a running server.
    type: str
    default: main
  state:
    description: V(present) downloads what is missing, V(verified) only checks.
    type: str
    choices: [present, verified]
    default: present
  cache_dir:
    description: The Hugging Face hub cache (C(HF_HOME/hub)).
    type: path
    required: true
  endpoint:
    description: The Hub. Defaults to C(HF_ENDPOINT) from the environment, else V(https://huggingface.co).
    type: str
  hf_cli:
    description: The C(hf) command of the huggingface_hub that downloads (the serving venv's).
    type: path
  verify_sha256:
    description: Compare the sha256 of every LFS file with the Hub's.
    type: bool
    default: true
  disk_margin:
    description: Free space to keep beyond the download, bytes (V(50GB), V(40GiB), V(5000000000)) or a share of the download (V(10%)).
    type: str
    default: 5%
  margin_name:
    description: How the refusal names the setting of the margin.
    type: str
    default: disk_margin
  record:
    description: JSON file that keeps the verified hashes, so that unchanged files are not hashed again.
    type: path
  progress_path:
    description: File that says, while the download runs, how many bytes of the total are there.
    type: path
  download_log:
    description: File that receives the output of C(hf download).
    type: path
  timeout:
    description: Seconds one request to the Hub's API may take.
    type: int
    default: 60
attributes:
  check_mode:
    description: Reads the Hub and the cache; reports what it would remove and download.
    support: full
'''

EXAMPLES = r'''
- name: Download and verify the weights at a pinned commit
  inferops.serving.model_weights:
    repo_id: Qwen/Qwen3-0.6B
    revision: c1899de289a04d12100db370d81485cdf75e47ca
    cache_dir: /var/lib/sglang/huggingface/hub
    hf_cli: /opt/sglang/venv/bin/hf
    disk_margin: 10%
'''

RETURN = r'''
commit:
  description: The commit the files belong to.
  returned: success
  type: str
verified:
  description: Whether every file is present, of the stated size and hash, and every indexed shard exists.
  returned: always
  type: bool
problems:
  description: What was wrong before the download (or, with O(state=verified), now), one sentence each.
  returned: always
  type: list
  elements: str
fetch:
  description: The files downloaded (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
removed:
  description: Files removed from the cache (wrong size or hash, orphaned C(*.incomplete)), or that would be.
  returned: always
  type: list
  elements: str
bytes_total:
  description: Size of the model at this commit.
  returned: success
  type: int
bytes_needed:
  description: Bytes the download needed (less what C(*.incomplete) files already held).
  returned: success
  type: int
bytes_free:
  description: Free bytes on the cache's file system before the download.
  returned: success
  type: int
hashed:
  description: Files whose sha256 was computed in this run (the others came from O(record)).
  returned: success
  type: list
  elements: str
snapshot:
  description: The folder with the model's files, to serve from.
  returned: success
  type: str
'''

import json
import os
import threading

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.inferops.serving.plugins.module_utils._commands import run_c
from ansible_collections.inferops.serving.plugins.module_utils._model_weights import (
    INDEX_FILE,
    ModelWeightsError,
    describe,
    disk_refusal,
    listing_url,
    margin_bytes,
    parse_listing,
    plan,
    progress_line,
    recorded_hash,
    repo_folder_name,
    scan_cache,
    sha256_of,
    shard_problems,
)


def _token():
    if os.environ.get('HF_TOKEN'):
        return os.environ['HF_TOKEN'].strip()
    path = os.environ.get('HF_TOKEN_PATH')
    if path and os.path.isfile(path):
        with open(path) as handle:
            return handle.read().strip()
    return None


def _listing(module, endpoint, repo_id, revision):
    token = _token()
    headers = {'Authorization': 'Bearer ' + token} if token else {}
    url = listing_url(endpoint, repo_id, revision)
    try:
        return parse_listing(open_url(url, headers=headers, timeout=module.params['timeout']).read())
    except ModelWeightsError as exc:
        module.fail_json(msg='Cannot read the files of %s at %s from %s: %s' % (repo_id, revision, endpoint, exc))
    except Exception as exc:  # open_url raises HTTPError, URLError, socket errors, SSL errors
        module.fail_json(msg='Cannot read the files of %s at %s from %s: %s. Check the repository, the '
                         'revision, the token and the endpoint.' % (repo_id, revision, endpoint, exc))


def _free_bytes(path):
    while not os.path.isdir(path):
        path = os.path.dirname(path)
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize, path


def _load_record(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return {}


def _hashes(listing, scan, record, verify):
    hashes, computed = {}, []
    if not verify:
        return hashes, computed
    for item in listing['files']:
        entry = scan['files'][item['name']]
        if not item['sha256'] or not entry['present'] or entry['size'] != item['size']:
            continue
        known = recorded_hash(record, entry)
        if known is None:
            known = sha256_of(entry['blob'])
            computed.append(item['name'])
        hashes[item['name']] = known
    return hashes, computed


def _check(listing, repo_dir, record, verify):
    """scan, hashes and plan of the cache as it is now, and the index's shards if it is there."""
    scan = scan_cache(repo_dir, listing['commit'], listing['files'])
    hashes, computed = _hashes(listing, scan, record, verify)
    result = plan(listing, scan, hashes, verify)
    index = scan['files'].get(INDEX_FILE)
    if index and index['present'] and index['size'] == [f['size'] for f in listing['files'] if f['name'] == INDEX_FILE][0]:
        with open(index['blob']) as handle:
            result['problems'].extend(shard_problems(listing, handle.read()))
    return scan, hashes, computed, result


def _remove(path, removed):
    if os.path.lexists(path):
        os.unlink(path)
        removed.append(path)


def _download(module, endpoint, repo_id, commit, log_path, progress_path, files, target):
    """Runs `hf download`, writing its progress meanwhile; returns (rc, last lines of its output)."""
    params = module.params
    argv = [params['hf_cli'], 'download', repo_id, '--revision', commit, '--cache-dir', params['cache_dir']]
    finished = threading.Event()

    def report():
        while not finished.wait(2):
            _write_progress(progress_path, files, target)

    reporter = threading.Thread(target=report)
    reporter.daemon = True
    reporter.start()
    try:
        rc, out, err = run_c(module, argv, environ_update=dict(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_TELEMETRY='1'))
    finally:
        finished.set()
        reporter.join()
    _write_progress(progress_path, files, target)
    output = (out + err).replace('\r', '\n')
    if log_path:
        with open(log_path, 'w') as log:
            log.write(output)
    return rc, [line for line in output.splitlines() if line.strip()][-3:]


def _write_progress(path, files, target):
    if not path:
        return
    done = 0
    for blob in files:
        for candidate in (blob, blob + '.incomplete'):
            if os.path.exists(candidate):
                done += os.path.getsize(candidate)
                break
    with open(path, 'w') as handle:
        handle.write(progress_line(min(done, target), target) + '\n')


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_id=dict(type='str', required=True),
            revision=dict(type='str', default='main'),
            state=dict(type='str', choices=['present', 'verified'], default='present'),
            cache_dir=dict(type='path', required=True),
            endpoint=dict(type='str'),
            hf_cli=dict(type='path'),
            verify_sha256=dict(type='bool', default=True),
            disk_margin=dict(type='str', default='5%'),
            margin_name=dict(type='str', default='disk_margin'),
            record=dict(type='path'),
            progress_path=dict(type='path'),
            download_log=dict(type='path'),
            timeout=dict(type='int', default=60),
        ),
        required_if=[('state', 'present', ['hf_cli'])],
        supports_check_mode=True,
    )
    params = module.params
    repo_id, verify = params['repo_id'], params['verify_sha256']
    endpoint = params['endpoint'] or os.environ.get('HF_ENDPOINT') or 'https://huggingface.co'
    listing = _listing(module, endpoint, repo_id, params['revision'])
    repo_dir = os.path.join(params['cache_dir'], repo_folder_name(repo_id))
    record = _load_record(params['record']) if params['record'] else {}
    scan, hashes, computed, before = _check(listing, repo_dir, record, verify)
    snapshot = os.path.join(repo_dir, 'snapshots', listing['commit'])
    result = dict(changed=False, commit=listing['commit'], snapshot=snapshot, bytes_total=before['bytes_total'],
                  bytes_needed=before['bytes_needed'], problems=[describe(p) for p in before['problems']],
                  fetch=before['fetch'], removed=[], hashed=computed, verified=not before['problems'])
    bad = set(before['fetch'])

    if params['state'] == 'verified':
        if before['problems']:
            module.fail_json(msg='The weights of %s at %s in %s are not verified: %s.' % (
                repo_id, listing['commit'], params['cache_dir'], '; '.join(result['problems'])), **result)
        _save_record(module, params['record'], record, scan, hashes)
        module.exit_json(**result)

    free, where = _free_bytes(params['cache_dir'])
    result['bytes_free'] = free
    try:
        margin = margin_bytes(params['disk_margin'], before['bytes_needed'])
    except ModelWeightsError as exc:
        module.fail_json(msg='%s: %s' % (params['margin_name'], exc), **result)
    refusal = disk_refusal(before['bytes_needed'], free, margin, params['margin_name'], where)
    if refusal:
        module.fail_json(msg=refusal, **result)

    stale = [scan['files'][name]['path'] for name in bad if scan['files'][name]['present']]
    stale += [scan['files'][name]['blob'] for name in bad if scan['files'][name]['present']
              and scan['files'][name]['blob'] != scan['files'][name]['path']]
    stale += [scan['files'][name]['path'] for name in bad if scan['files'][name].get('dangling')]
    stale += before['orphaned_incomplete']
    if module.check_mode:
        result.update(removed=sorted(stale), changed=bool(stale or bad))
        module.exit_json(**result)
    for path in stale:
        _remove(path, result['removed'])

    if bad:
        etags = dict((f['name'], f['etag']) for f in listing['files'])
        blobs = [os.path.join(scan['blobs_dir'], etags[name]) for name in sorted(bad)]
        rc, tail = _download(module, endpoint, repo_id, listing['commit'], params['download_log'],
                             params['progress_path'], blobs,
                             sum(f['size'] for f in listing['files'] if f['name'] in bad))
        result['changed'] = True
        if rc != 0:
            module.fail_json(msg='hf download of %s at %s failed (rc=%d); the next run resumes it. Last lines: %s' % (
                repo_id, listing['commit'], rc, ' | '.join(tail)), rc=rc, **result)
        scan, hashes, more, after = _check(listing, repo_dir, record, verify)
        result['hashed'] = sorted(set(computed + more))
        _reject(module, result, scan, after, repo_id, listing['commit'])
    elif before['problems']:
        _reject(module, result, scan, before, repo_id, listing['commit'])
    result['changed'] = result['changed'] or bool(result['removed'])
    result['verified'] = True
    _save_record(module, params['record'], record, scan, hashes)
    module.exit_json(**result)


def _reject(module, result, scan, checked, repo_id, commit):
    """After the download: a file that still fails is removed, so no server loads it."""
    if not checked['problems']:
        return
    for problem in checked['problems']:
        entry = scan['files'].get(problem['file']) or {}
        if problem['problem'] in ('wrong size', 'wrong sha256') and entry.get('present'):
            _remove(entry['path'], result['removed'])
            if entry['blob'] != entry['path']:
                _remove(entry['blob'], result['removed'])
    result.update(verified=False, changed=result['changed'] or bool(result['removed']),
                  problems=[describe(p) for p in checked['problems']])
    module.fail_json(msg='The weights of %s at %s did not verify: %s.%s' % (
        repo_id, commit, '; '.join(result['problems']),
        ' The files that failed were removed from the cache.' if result['removed'] else ''), **result)


def _save_record(module, path, record, scan, hashes):
    if not path or module.check_mode:
        return
    fresh = dict(record)
    for name, sha256 in hashes.items():
        entry = scan['files'][name]
        fresh[entry['blob']] = {'size': entry['size'], 'mtime_ns': entry['mtime_ns'], 'sha256': sha256}
    if fresh == record:
        return
    try:
        with open(path + '.tmp', 'w') as handle:
            json.dump(fresh, handle, sort_keys=True, indent=1)
        os.rename(path + '.tmp', path)
    except (IOError, OSError) as exc:
        module.warn('Could not keep the verified hashes in %s (%s): the next run hashes the files again.' % (path, exc))


if __name__ == '__main__':
    main()
