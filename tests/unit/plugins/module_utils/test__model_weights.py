# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Hub states against what the Hugging Face cache holds."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json
import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._model_weights import (
    ModelWeightsError,
    describe,
    disk_refusal,
    index_shards,
    listing_url,
    margin_bytes,
    parse_listing,
    plan,
    progress_line,
    recorded_hash,
    repo_folder_name,
    scan_cache,
    shard_problems,
)

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'model_weights')
SHARD_1 = 'model-00001-of-00002.safetensors'
SHARD_2 = 'model-00002-of-00002.safetensors'


def _listing_text():
    with open(os.path.join(FIXTURES, 'hub_listing_blobs.json')) as handle:
        return handle.read()


@pytest.fixture
def listing():
    return parse_listing(_listing_text())


def _cache(tmp_path, listing, contents):
    """A huggingface_hub cache of the listed files: contents maps a file name to its bytes."""
    repo = tmp_path / repo_folder_name('inferops-lab/tiny-model')
    snapshot = repo / 'snapshots' / listing['commit']
    snapshot.mkdir(parents=True)
    (repo / 'blobs').mkdir()
    etags = dict((item['name'], item['etag']) for item in listing['files'])
    for name, content in contents.items():
        (repo / 'blobs' / etags[name]).write_bytes(content)
        os.symlink(os.path.join('..', '..', 'blobs', etags[name]), str(snapshot / name))
    return str(repo)


def test_the_listing_gives_size_sha256_and_etag_of_every_file(listing):
    files = dict((item['name'], item) for item in listing['files'])
    assert listing['commit'] == json.loads(_listing_text())['sha']
    assert sorted(files) == ['config.json', SHARD_1, SHARD_2, 'model.safetensors.index.json']
    assert files[SHARD_1]['sha256'] == files[SHARD_1]['etag'] and len(files[SHARD_1]['sha256']) == 64
    # A file outside LFS is named in the cache by its git blob id.
    assert files['config.json']['sha256'] is None and len(files['config.json']['etag']) == 40


@pytest.mark.parametrize('text, says', [
    ('<html>', 'other than JSON'),
    ('{"id": "a/b"}', 'names no commit'),
    ('{"sha": "%s", "siblings": []}' % ('a' * 40), 'names no files'),
    ('{"sha": "%s", "siblings": [{"rfilename": "config.json"}]}' % ('a' * 40), 'blobs=true'),
])
def test_an_unreadable_listing_says_what_is_wrong(text, says):
    with pytest.raises(ModelWeightsError, match=says):
        parse_listing(text)


def test_the_listing_url_asks_for_blobs():
    assert listing_url('http://127.0.0.1:8090/', 'org/name', 'refs/pr/1') == \
        'http://127.0.0.1:8090/api/models/org/name/revision/refs%2Fpr%2F1?blobs=true'


@pytest.mark.parametrize('margin, needed, expected', [
    ('10%', 1000, 100), ('0', 1000, 0), ('50GB', 1, 50 * 10 ** 9), ('40GiB', 1, 40 * 2 ** 30),
    ('5000000000', 1, 5000000000), (' 1.5 TB ', 1, 1500 * 10 ** 9),
])
def test_the_margin_is_bytes_or_a_share_of_the_download(margin, needed, expected):
    assert margin_bytes(margin, needed) == expected


def test_a_margin_that_is_neither_says_which_forms_work():
    with pytest.raises(ModelWeightsError, match='neither bytes'):
        margin_bytes('plenty', 1)


def test_low_disk_is_refused_naming_both_figures_and_the_setting():
    message = disk_refusal(3 * 10 ** 9, 2 * 10 ** 9, 10 ** 9, 'sglang_server_weights_disk_margin', '/var/lib/sglang')
    assert '3.0 GB (3000000000 bytes)' in message and '2.0 GB (2000000000 bytes) is free' in message
    assert 'sglang_server_weights_disk_margin' in message and 'Nothing was downloaded' in message
    assert disk_refusal(10, 11, 1, 'm', '/') is None
    # Nothing to download needs no space.
    assert disk_refusal(0, 0, 100, 'm', '/') is None


def test_an_empty_cache_needs_every_file(tmp_path, listing):
    result = plan(listing, scan_cache(str(tmp_path / 'none'), listing['commit'], listing['files']), {})
    assert result['fetch'] == [item['name'] for item in listing['files']]
    assert result['bytes_needed'] == result['bytes_total'] == sum(item['size'] for item in listing['files'])
    assert [describe(p) for p in result['problems']][0] == 'config.json is missing'


def _bytes_of(listing, name, real):
    """Bytes of the stated size; `real` content only for the hashes the tests compare."""
    size = [item['size'] for item in listing['files'] if item['name'] == name][0]
    return real[:size].ljust(size, b'\0')


def test_a_cache_of_the_stated_sizes_and_hashes_is_verified(tmp_path, listing):
    contents = dict((item['name'], _bytes_of(listing, item['name'], b'')) for item in listing['files'])
    repo = _cache(tmp_path, listing, contents)
    scan = scan_cache(repo, listing['commit'], listing['files'])
    stated = dict((item['name'], item['sha256']) for item in listing['files'] if item['sha256'])
    result = plan(listing, scan, stated)
    assert result['problems'] == [] and result['fetch'] == [] and result['bytes_needed'] == 0


def test_truncated_and_wrong_hash_shards_are_fetched_again(tmp_path, listing):
    contents = dict((item['name'], _bytes_of(listing, item['name'], b'')) for item in listing['files'])
    contents[SHARD_1] = contents[SHARD_1][:1000]
    repo = _cache(tmp_path, listing, contents)
    scan = scan_cache(repo, listing['commit'], listing['files'])
    hashes = {SHARD_2: hashlib.sha256(b'other').hexdigest()}
    result = plan(listing, scan, hashes)
    assert result['fetch'] == [SHARD_1, SHARD_2]
    said = [describe(p) for p in result['problems']]
    assert said[0].startswith('%s has 1000 bytes, the Hub states ' % SHARD_1)
    assert said[1].startswith('%s has sha256 %s, the Hub states ' % (SHARD_2, hashes[SHARD_2]))
    # With the hash check off, the size alone decides.
    assert plan(listing, scan, hashes, verify_sha256=False)['fetch'] == [SHARD_1]


def test_an_incomplete_download_of_a_needed_file_is_resumed_and_others_are_orphaned(tmp_path, listing):
    repo = _cache(tmp_path, listing, {})
    shard_2 = [item for item in listing['files'] if item['name'] == SHARD_2][0]
    (tmp_path / repo / 'blobs' / (shard_2['etag'] + '.incomplete')).write_bytes(b'x' * 1000)
    (tmp_path / repo / 'blobs' / ('0' * 64 + '.incomplete')).write_bytes(b'x')
    result = plan(listing, scan_cache(repo, listing['commit'], listing['files']), {})
    assert result['resumable'] == {shard_2['etag']: 1000}
    assert result['bytes_needed'] == result['bytes_total'] - 1000
    assert result['orphaned_incomplete'] == [os.path.join(repo, 'blobs', '0' * 64 + '.incomplete')]


def test_a_shard_the_index_lists_but_the_repository_lacks_is_a_problem(listing):
    index = json.dumps({'weight_map': {'a': SHARD_1, 'b': SHARD_2, 'c': 'model-00003-of-00003.safetensors'}})
    assert index_shards(index) == [SHARD_1, SHARD_2, 'model-00003-of-00003.safetensors']
    assert [describe(p) for p in shard_problems(listing, index)] == [
        'model-00003-of-00003.safetensors is listed in model.safetensors.index.json but not in the repository']
    with pytest.raises(ModelWeightsError, match='weight_map'):
        index_shards('{}')


def test_a_recorded_hash_counts_only_for_the_unchanged_blob():
    record = {'/c/blobs/x': {'size': 10, 'mtime_ns': 5, 'sha256': 'abc'}}
    assert recorded_hash(record, {'blob': '/c/blobs/x', 'size': 10, 'mtime_ns': 5}) == 'abc'
    assert recorded_hash(record, {'blob': '/c/blobs/x', 'size': 10, 'mtime_ns': 6}) is None
    assert recorded_hash({}, {'blob': '/c/blobs/x', 'size': 10, 'mtime_ns': 5}) is None


def test_progress_reads_as_bytes_of_total():
    assert progress_line(1500 * 10 ** 6, 3 * 10 ** 9) == '1.5 GB of 3.0 GB (50%)'
    assert progress_line(0, 0) == '0 bytes of 0 bytes (100%)'
