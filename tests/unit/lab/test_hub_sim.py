# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's Hub stand-in: the repositories of the cases, and the commit the weights cases pin."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json
import os
import sys

import yaml

LAB = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'molecule', 'resources', 'lab')
sys.path.insert(0, os.path.abspath(os.path.join(LAB, 'hub_sim')))

import hub_sim  # noqa: E402  pylint: disable=wrong-import-position,import-error

WEIGHTS_VARS = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'molecule', 'sglang_server', 'vars', 'weights.yml')
SIZES = (4 * 1024 * 1024, 24 * 1024 * 1024)  # the unit's defaults


def test_the_scenario_pins_the_commit_the_stand_in_serves():
    with open(WEIGHTS_VARS) as handle:
        pinned = yaml.safe_load(handle)['sglang_server_model_revision']
    assert hub_sim.build_repo('tiny-model', *SIZES)['commit'] == pinned


def test_the_good_model_states_the_hashes_of_its_bytes_and_its_index_lists_its_shards():
    files = hub_sim.build_repo('tiny-model', 4096, 8192)['files']
    for item in files.values():
        if item['lfs_sha256']:
            assert hashlib.sha256(item['content']).hexdigest() == item['lfs_sha256'] == item['etag']
    shards = set(json.loads(files['model.safetensors.index.json']['content'])['weight_map'].values())
    assert shards <= set(files)


def test_the_faulty_models_are_faulty_in_one_way_each():
    bad = hub_sim.build_repo('tiny-model-bad-hash', 4096, 8192)['files']['model-00002-of-00002.safetensors']
    assert hashlib.sha256(bad['content']).hexdigest() != bad['lfs_sha256']
    files = hub_sim.build_repo('tiny-model-missing-shard', 4096, 8192)['files']
    shards = set(json.loads(files['model.safetensors.index.json']['content'])['weight_map'].values())
    assert shards - set(files) == {'model-00003-of-00003.safetensors'}
