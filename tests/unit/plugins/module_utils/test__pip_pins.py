# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._pip_pins import (
    missing_pins,
    parse_pip_index_versions,
    pins_to_look_up,
)

PIP_INDEX = 'sglang (0.5.9)\nAvailable versions: 0.5.9, 0.5.8, 0.5.7\n'


def test_pip_index_versions_are_read():
    assert parse_pip_index_versions(PIP_INDEX) == ['0.5.9', '0.5.8', '0.5.7']
    assert parse_pip_index_versions('') == []


def test_a_pin_the_index_lacks_is_named():
    versions = {'sglang': '0.5.99', 'flashinfer-python': '0.6.3', 'torch': '2.9.1'}
    listings = {
        'sglang': {'rc': 0, 'stdout': PIP_INDEX, 'stderr': ''},
        'flashinfer-python': {'rc': 1, 'stdout': '', 'stderr': 'ERROR: No matching distribution found for x'},
    }
    errors = missing_pins(versions, listings)
    assert errors[1].startswith("sglang_version is '0.5.99', but the package index offers sglang only in: 0.5.9")
    assert errors[0].startswith('sglang_flashinfer_version: the package index does not offer flashinfer-python')
    assert len(errors) == 2


def test_only_pins_that_are_not_installed_are_looked_up():
    pip_list = '[{"name": "sglang", "version": "0.5.9"}, {"name": "flashinfer_python", "version": "0.6.2"}]'
    versions = {'sglang': '0.5.9', 'flashinfer-python': '0.6.3', 'torch': '2.9.1'}
    assert pins_to_look_up(pip_list, versions, ['sglang', 'flashinfer-python']) == ['flashinfer-python']
    assert pins_to_look_up('not json', versions, ['sglang']) == ['sglang']
    assert pins_to_look_up(['sglang==0.5.9', 'flashinfer_python==0.6.2'], versions, ['sglang', 'flashinfer-python']) == [
        'flashinfer-python']


def test_looped_task_results_are_read_by_item():
    results = [{'item': 'sglang', 'rc': 0, 'stdout': PIP_INDEX, 'stderr': ''},
               {'item': 'torch', 'skipped': True}]
    assert missing_pins({'sglang': '0.5.8', 'torch': '0'}, results) == []
    assert missing_pins({'sglang': '0.4'}, results)[0].startswith("sglang_version is '0.4'")
