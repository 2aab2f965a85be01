# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._sglang_venvs import (
    VenvError,
    prune_plan,
    stale_caches,
    venv_name,
    venv_names,
)

SEED = {'sglang': '0.5.9', 'flashinfer-python': '0.6.3', 'flashinfer-cubin': '0.6.3', 'sgl-kernel': '0.3.21',
        'torch': '2.9.1'}


def test_a_venv_is_named_after_its_set_and_what_it_holds():
    name = venv_name('0.5.9', SEED, list(SEED), True)
    assert name.startswith('0.5.9-') and len(name) == len('0.5.9-') + 8
    # The same inputs in another order: the same venv.
    assert venv_name('0.5.9', dict(reversed(list(SEED.items()))), list(reversed(list(SEED))), True) == name


@pytest.mark.parametrize('change', [
    {'versions': dict(SEED, torch='2.9.2')},
    {'packages': ['sglang', 'flashinfer-python']},
    {'install_dependencies': False},
])
def test_anything_else_pinned_or_installed_is_another_venv(change):
    inputs = {'versions': SEED, 'packages': list(SEED), 'install_dependencies': True}
    inputs.update(change)
    assert venv_name('0.5.9', inputs['versions'], inputs['packages'], inputs['install_dependencies']) \
        != venv_name('0.5.9', SEED, list(SEED), True)


@pytest.mark.parametrize('bad', ['', None, '../0.5.9', '0.5.9/x', ' 0.5.9'])
def test_a_set_name_that_is_no_folder_name_is_refused(bad):
    with pytest.raises(VenvError):
        venv_name(bad, SEED, list(SEED), True)


def test_the_served_venvs_are_the_history_s_venvs_of_the_folder():
    paths = ['/opt/sglang/venv', '/opt/sglang/venvs/0.5.9-aaaaaaaa', '/opt/sglang/venvs/0.5.23-bbbbbbbb/',
             '/elsewhere/0.5.9-cccccccc', None, '/opt/sglang/venvs/../x']
    assert venv_names(paths, '/opt/sglang/venvs/') == ['0.5.9-aaaaaaaa', '0.5.23-bbbbbbbb']


def test_a_venv_that_served_again_counts_by_its_latest_time():
    venvs = {'a': 1.0, 'b': 2.0, 'c': 3.0}
    # a served, then b, then a again: b is the older of the two that served.
    kept, removed = prune_plan(venvs, ['a', 'b', 'a'], 2, ['a'])
    assert kept == ['a', 'b'] and removed == ['c']


def test_the_venvs_that_served_most_recently_stay_the_serving_one_always():
    venvs = {'seed': 100.0, 'current': 200.0, 'rejected': 300.0}
    # current serves now, seed served before it; rejected (an upgrade that was rolled back) never served.
    kept, removed = prune_plan(venvs, ['seed', 'current'], 2, ['current'])
    assert kept == ['current', 'seed'] and removed == ['rejected']
    kept, removed = prune_plan(venvs, ['seed', 'current'], 1, ['current'])
    assert kept == ['current'] and removed == ['seed', 'rejected']
    kept, removed = prune_plan(venvs, ['seed', 'current'], 5, ['current'])
    assert sorted(kept) == sorted(venvs) and removed == []


def test_never_served_venvs_go_oldest_first_and_protected_ones_stay_beyond_keep():
    venvs = {'old': 1.0, 'mid': 2.0, 'new': 3.0, 'serving': 0.5}
    kept, removed = prune_plan(venvs, ['serving'], 2, ['serving'])
    assert kept == ['serving', 'new'] and removed == ['mid', 'old']
    # The venv a switch is about to run is protected as well as the serving one, even with keep 1.
    kept, removed = prune_plan(venvs, ['serving'], 1, ['serving', 'old'])
    assert kept == ['serving', 'old'] and removed == ['new', 'mid']


def test_a_history_name_without_its_venv_is_ignored():
    kept, removed = prune_plan({'a': 1.0}, ['gone', 'a'], 1, [])
    assert kept == ['a'] and removed == []


@pytest.mark.parametrize('keep', [0, -1, True, '2', 1.5])
def test_keep_must_be_a_count(keep):
    with pytest.raises(VenvError, match='keep'):
        prune_plan({'a': 1.0}, [], keep, [])


def test_a_protected_name_that_is_no_venv_is_refused_before_anything_is_removed():
    with pytest.raises(VenvError, match='typo is not a venv of the folder'):
        prune_plan({'a': 1.0, 'b': 2.0}, [], 1, ['typo'])


def test_a_kernel_cache_goes_when_its_venv_does_not_stay():
    caches = ['0.5.9-aaaaaaaa', '0.5.23-bbbbbbbb', '0.5.23-cccccccc', '.removing-0.5.9-dddddddd', 'gone-eeeeeeee']
    kept = ['0.5.23-bbbbbbbb', '0.5.9-aaaaaaaa']
    # 0.5.23-cccccccc's venv was pruned now, gone-eeeeeeee's earlier; a removal in progress is not a cache.
    assert stale_caches(caches, kept) == ['0.5.23-cccccccc', 'gone-eeeeeeee']
    assert stale_caches(caches, kept + ['0.5.23-cccccccc', 'gone-eeeeeeee']) == []
    assert stale_caches([], kept) == []
