# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model weights as a verified artefact: what the Hub states against what the cache holds.

The Hub's listing of a repository at a revision (GET {endpoint}/api/models/{repo}/revision/{rev}
?blobs=true, what huggingface_hub's model_info(files_metadata=True) wraps) states every file's
size and, for LFS files, its sha256. The huggingface_hub cache keeps one folder per repository
(models--org--name) with the files of a commit as links in snapshots/<commit>/ to blobs/<etag>;
an unfinished download is blobs/<etag>.incomplete, which the next download resumes. The etag of
an LFS file is its sha256, of any other file its git blob id.

scan_cache reads the cache (no writes); plan and the other functions are pure.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json
import os
import re

INDEX_FILE = 'model.safetensors.index.json'
INCOMPLETE_SUFFIX = '.incomplete'
_COMMIT = re.compile(r'^[0-9a-f]{40}$')
_MARGIN = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*(%|[kKMGT]i?B?|B)?\s*$')
_UNITS = {'': 1, 'B': 1, 'K': 10 ** 3, 'M': 10 ** 6, 'G': 10 ** 9, 'T': 10 ** 12,
          'KI': 2 ** 10, 'MI': 2 ** 20, 'GI': 2 ** 30, 'TI': 2 ** 40}


class ModelWeightsError(Exception):
    """The Hub's answer or a file in the cache cannot be read."""


def is_commit(revision):
    return bool(_COMMIT.match(revision or ''))


def repo_folder_name(repo_id):
    """huggingface_hub's folder of a model repository in the cache."""
    return 'models--' + repo_id.replace('/', '--')


def listing_url(endpoint, repo_id, revision):
    # quote without importing urllib: only '/' in a revision (a branch such as 'refs/pr/1') needs it.
    return '%s/api/models/%s/revision/%s?blobs=true' % (endpoint.rstrip('/'), repo_id, revision.replace('/', '%2F'))


def parse_listing(text):
    """The Hub's JSON listing as {'commit': sha, 'files': [{'name', 'size', 'sha256', 'etag'}]}."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ModelWeightsError('the Hub answered with something other than JSON (%s)' % exc)
    if not isinstance(data, dict) or not is_commit(data.get('sha')):
        raise ModelWeightsError('the Hub listing names no commit (field "sha")')
    siblings = data.get('siblings')
    if not isinstance(siblings, list) or not siblings:
        raise ModelWeightsError('the Hub listing names no files (field "siblings")')
    files = []
    for sibling in siblings:
        name = sibling.get('rfilename') if isinstance(sibling, dict) else None
        lfs = sibling.get('lfs') or {} if isinstance(sibling, dict) else {}
        size = lfs.get('size', sibling.get('size')) if name else None
        if not name or not isinstance(size, int):
            raise ModelWeightsError('the Hub listing gives no size for %s; it needs ?blobs=true' % (name or sibling))
        sha256 = lfs.get('sha256')
        etag = sha256 or sibling.get('blobId')
        if not etag:
            raise ModelWeightsError('the Hub listing gives neither an LFS sha256 nor a blob id for %s' % name)
        files.append({'name': name, 'size': size, 'sha256': sha256, 'etag': etag})
    return {'commit': data['sha'], 'files': sorted(files, key=lambda item: item['name'])}


def index_shards(text):
    """The shard files a model.safetensors.index.json maps weights to."""
    try:
        weight_map = json.loads(text)['weight_map']
        return sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelWeightsError('%s has no readable weight_map (%s)' % (INDEX_FILE, exc))


def margin_bytes(margin, needed):
    """A margin as bytes: a number of bytes ('5000000000', '50GB', '40GiB') or a share of `needed` ('10%')."""
    match = _MARGIN.match(str(margin))
    if not match:
        raise ModelWeightsError('%r is neither bytes (50GB, 40GiB, 5000000000) nor a share (10%%)' % (margin,))
    number, unit = float(match.group(1)), (match.group(2) or '')
    if unit == '%':
        return int(needed * number / 100)
    return int(number * _UNITS[unit.upper().rstrip('B')])


def human_bytes(count):
    for unit, size in (('TB', 10 ** 12), ('GB', 10 ** 9), ('MB', 10 ** 6), ('kB', 10 ** 3)):
        if count >= size:
            return '%.1f %s' % (count / float(size), unit)
    return '%d bytes' % count


def scan_cache(repo_dir, commit, files):
    """What the cache holds for the listed files: one entry per file, plus the *.incomplete blobs.

    A file is 'present' when snapshots/<commit>/<name> exists; 'blob' is the path it resolves to
    (the file itself in a cache copied without links) and 'blob_etag' the name of that blob.
    """
    snapshot = os.path.join(repo_dir, 'snapshots', commit)
    seen = {}
    for item in files:
        path = os.path.join(snapshot, item['name'])
        entry = {'path': path, 'present': False}
        if os.path.exists(path):
            real = os.path.realpath(path)
            stat = os.stat(real)
            entry.update(present=True, blob=real, size=stat.st_size, mtime_ns=stat.st_mtime_ns,
                         blob_etag=os.path.basename(real) if os.path.islink(path) else None)
        elif os.path.lexists(path):
            entry['dangling'] = True
        seen[item['name']] = entry
    blobs = os.path.join(repo_dir, 'blobs')
    incomplete = {}
    if os.path.isdir(blobs):
        for name in sorted(os.listdir(blobs)):
            if name.endswith(INCOMPLETE_SUFFIX):
                incomplete[name[:-len(INCOMPLETE_SUFFIX)]] = os.path.getsize(os.path.join(blobs, name))
    return {'files': seen, 'incomplete': incomplete, 'blobs_dir': blobs}


def sha256_of(path, chunk=16 * 1024 * 1024):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(chunk), b''):
            digest.update(block)
    return digest.hexdigest()


def recorded_hash(record, entry):
    """The sha256 a verification record holds for a blob, if the blob is unchanged since."""
    known = (record or {}).get(entry.get('blob') or '')
    if known and known.get('size') == entry.get('size') and known.get('mtime_ns') == entry.get('mtime_ns'):
        return known.get('sha256')
    return None


def plan(listing, scan, hashes, verify_sha256=True):
    """What is wrong with the cache and what a download must fetch.

    hashes: file name -> sha256 of the cached file, for the files whose hash was computed (or
    recorded); a file without an entry here is judged by its size alone.
    """
    problems, fetch = [], []
    for item in listing['files']:
        entry = scan['files'].get(item['name']) or {'present': False}
        if not entry['present']:
            problems.append({'file': item['name'], 'problem': 'missing'})
            fetch.append(item)
        elif entry['size'] != item['size']:
            problems.append({'file': item['name'], 'problem': 'wrong size', 'size': entry['size'],
                             'expected': item['size']})
            fetch.append(item)
        elif verify_sha256 and item['sha256'] and hashes.get(item['name']) not in (None, item['sha256']):
            problems.append({'file': item['name'], 'problem': 'wrong sha256', 'sha256': hashes[item['name']],
                             'expected': item['sha256']})
            fetch.append(item)
    wanted = set(item['etag'] for item in fetch)
    resumable = dict((etag, size) for etag, size in scan['incomplete'].items() if etag in wanted)
    orphaned = sorted(os.path.join(scan['blobs_dir'], etag + INCOMPLETE_SUFFIX)
                      for etag in scan['incomplete'] if etag not in wanted)
    total = sum(item['size'] for item in fetch)
    return {
        'commit': listing['commit'],
        'problems': problems,
        'fetch': [item['name'] for item in fetch],
        'bytes_total': sum(item['size'] for item in listing['files']),
        'bytes_to_fetch': total,
        # What a resumed download still needs: the .incomplete files keep what they have.
        'bytes_needed': max(0, total - sum(min(size, _size_of_etag(fetch, etag)) for etag, size in resumable.items())),
        'resumable': resumable,
        'orphaned_incomplete': orphaned,
    }


def _size_of_etag(files, etag):
    return max([item['size'] for item in files if item['etag'] == etag] or [0])


def shard_problems(listing, index_text):
    """Shards model.safetensors.index.json lists that the repository at this commit lacks."""
    names = set(item['name'] for item in listing['files'])
    return [{'file': shard, 'problem': 'listed in %s but not in the repository' % INDEX_FILE}
            for shard in index_shards(index_text) if shard not in names]


def describe(problem):
    """One problem as a person reads it."""
    kind = problem['problem']
    if kind == 'wrong size':
        return '%s has %d bytes, the Hub states %d (truncated or replaced)' % (
            problem['file'], problem['size'], problem['expected'])
    if kind == 'wrong sha256':
        return '%s has sha256 %s, the Hub states %s' % (problem['file'], problem['sha256'], problem['expected'])
    if kind == 'missing':
        return '%s is missing' % problem['file']
    return '%s is %s' % (problem['file'], kind)


def disk_refusal(needed, free, margin, margin_variable, where):
    """The refusal when free space is below what the download needs plus the margin, or None."""
    if needed == 0 or free >= needed + margin:
        return None
    return ('Not enough free space for the model weights in %s: the download needs %s (%d bytes) plus a margin of '
            '%s (%s), but only %s (%d bytes) is free. Free space there, point the cache elsewhere, or lower %s. '
            'Nothing was downloaded.' % (where, human_bytes(needed), needed, human_bytes(margin), margin_variable,
                                         human_bytes(free), free, margin_variable))


def progress_line(done, total):
    share = 100.0 * done / total if total else 100.0
    return '%s of %s (%.0f%%)' % (human_bytes(done), human_bytes(total), share)
