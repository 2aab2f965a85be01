# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import yaml

from ansible_collections.inferops.serving.plugins.module_utils._patch_releases import (
    patch_release_errors,
    releases_of,
)

PATCH_FILE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'sglang', 'vars', 'patches',
                          'sm120_allreduce_fusion.yml')
SWITCH = 'sglang_sm120_allreduce_fusion_patch'
SEED_PINS = {'sglang_version': '0.5.9', 'sglang_flashinfer_version': '0.6.3', 'sglang_torch_version': '2.9.1'}


def shipped_patch():
    with open(PATCH_FILE) as handle:
        return yaml.safe_load(handle)['_sglang_sm120_allreduce_fusion_patch']


def test_the_shipped_patch_fits_the_seed_releases():
    assert releases_of(shipped_patch()) == {'flashinfer-python': ['0.6.3'], 'sglang': ['0.5.9']}
    assert patch_release_errors(shipped_patch(), SEED_PINS, SWITCH) == []


def test_todays_release_is_refused_by_name_with_the_way_out():
    pins = dict(SEED_PINS, sglang_version='0.5.23', sglang_flashinfer_version='0.7.2')
    [message] = patch_release_errors(shipped_patch(), pins, SWITCH)
    assert message.startswith('sglang_sm120_allreduce_fusion_patch: the sm120_allreduce_fusion patch fits'
                              ' flashinfer-python 0.6.3 and sglang 0.5.9 only')
    assert 'sglang_version is 0.5.23' in message and 'sglang_flashinfer_version is 0.7.2' in message
    assert 'Set sglang_sm120_allreduce_fusion_patch to false, or pin and install the releases it fits' in message
    assert 'Nothing was changed' in message


def test_one_distribution_off_its_release_is_enough_to_refuse():
    [message] = patch_release_errors(shipped_patch(), dict(SEED_PINS, sglang_flashinfer_version='0.6.4'), SWITCH)
    assert 'sglang_flashinfer_version is 0.6.4' in message
    assert 'sglang_version is' not in message


def test_a_patch_written_for_two_releases_accepts_either():
    patch = {'name': 'two', 'files': [{'distribution': 'sglang', 'version': '0.5.9', 'path': 'a'},
                                      {'distribution': 'sglang', 'version': '0.5.10', 'path': 'a'}]}
    assert patch_release_errors(patch, {'sglang_version': '0.5.10'}, SWITCH) == []
    assert 'fits sglang 0.5.9 or 0.5.10 only' in patch_release_errors(patch, {'sglang_version': '0.5.11'}, SWITCH)[0]


def test_a_distribution_the_patch_edits_must_be_installed():
    [message] = patch_release_errors(shipped_patch(), SEED_PINS, SWITCH, installed=['sglang'])
    assert 'but sglang_packages installs sglang, not flashinfer-python' in message
    assert patch_release_errors(shipped_patch(), SEED_PINS, SWITCH, installed=['sglang', 'flashinfer-python']) == []
    # With their dependencies installed too, every distribution is there.
    assert patch_release_errors(shipped_patch(), SEED_PINS, SWITCH, installed=None) == []
