# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import errno
import importlib
import os

MODULE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'plugins', 'modules', 'sglang_venvs.py')


def make_venv(venvs, caches, name, installed):
    (venvs / name).mkdir(parents=True)
    marker = venvs / name / 'pyvenv.cfg'
    marker.write_text('home = /usr/bin\n')
    os.utime(str(marker), (installed, installed))
    (caches / name / 'triton').mkdir(parents=True)
    (caches / name / 'triton' / 'kernel.cubin').write_bytes(b'\0' * 16)


def test_a_pruned_venv_takes_its_kernel_cache_along_and_the_kept_ones_keep_theirs(run_module, tmp_path):
    venvs, caches = tmp_path / 'venvs', tmp_path / 'cache'
    make_venv(venvs, caches, '0.5.9-aaaaaaaa', 100)
    make_venv(venvs, caches, '0.5.23-bbbbbbbb', 200)
    make_venv(venvs, caches, '0.5.23-cccccccc', 300)
    # A venv removed by hand leaves its cache behind.
    (caches / '0.5.9-dddddddd').mkdir()
    args = dict(path=str(venvs), caches_path=str(caches), active='0.5.23-bbbbbbbb',
                served=[str(venvs / '0.5.9-aaaaaaaa'), str(venvs / '0.5.23-bbbbbbbb')], keep=2)

    checked = run_module(_ansible_check_mode=True, **args)
    assert checked['changed'] is True
    assert checked['removed_caches'] == ['0.5.23-cccccccc', '0.5.9-dddddddd']
    assert sorted(os.listdir(str(caches))) == ['0.5.23-bbbbbbbb', '0.5.23-cccccccc', '0.5.9-aaaaaaaa', '0.5.9-dddddddd']

    pruned = run_module(**args)
    assert pruned['removed'] == ['0.5.23-cccccccc']
    assert pruned['removed_caches'] == ['0.5.23-cccccccc', '0.5.9-dddddddd']
    assert sorted(os.listdir(str(venvs))) == ['0.5.23-bbbbbbbb', '0.5.9-aaaaaaaa']
    assert sorted(os.listdir(str(caches))) == ['0.5.23-bbbbbbbb', '0.5.9-aaaaaaaa']
    assert (caches / '0.5.9-aaaaaaaa' / 'triton' / 'kernel.cubin').exists()

    again = run_module(**args)
    assert again['changed'] is False and again['removed_caches'] == []


def test_without_a_caches_path_no_cache_is_touched(run_module, tmp_path):
    venvs, caches = tmp_path / 'venvs', tmp_path / 'cache'
    make_venv(venvs, caches, '0.5.9-aaaaaaaa', 100)
    make_venv(venvs, caches, '0.5.23-bbbbbbbb', 200)
    pruned = run_module(path=str(venvs), active='0.5.23-bbbbbbbb', keep=1)
    assert pruned['removed'] == ['0.5.9-aaaaaaaa'] and pruned['removed_caches'] == []
    assert sorted(os.listdir(str(caches))) == ['0.5.23-bbbbbbbb', '0.5.9-aaaaaaaa']


def refuse_renaming_folders(monkeypatch, module):
    """os.rename as overlayfs answers it for a folder of a container image's lower layer."""
    real_rename = os.rename

    def rename(source, target):
        if os.path.isdir(source):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), source, None, target)
        return real_rename(source, target)
    monkeypatch.setattr(module.os, 'rename', rename)


def test_a_folder_the_file_system_will_not_rename_is_marked_then_removed(monkeypatch, tmp_path):
    sglang_venvs = importlib.import_module('ansible_collections.inferops.serving.plugins.modules.sglang_venvs')
    refuse_renaming_folders(monkeypatch, sglang_venvs)
    venvs, caches = tmp_path / 'venvs', tmp_path / 'cache'
    make_venv(venvs, caches, '0.5.9-aaaaaaaa', 100)
    sglang_venvs.remove_folder(str(venvs), '0.5.9-aaaaaaaa')
    assert os.listdir(str(venvs)) == []


def test_what_a_killed_removal_left_marked_is_no_venv_and_the_next_run_removes_it(run_module, tmp_path):
    venvs, caches = tmp_path / 'venvs', tmp_path / 'cache'
    make_venv(venvs, caches, '0.5.9-aaaaaaaa', 100)
    make_venv(venvs, caches, '0.5.23-bbbbbbbb', 200)
    # A run killed while it removed 0.5.9's venv and cache in place: both hold the mark.
    (venvs / '0.5.9-aaaaaaaa' / '.inferops-removing').write_text('')
    (caches / '0.5.9-aaaaaaaa' / '.inferops-removing').write_text('')
    args = dict(path=str(venvs), caches_path=str(caches), active='0.5.23-bbbbbbbb', keep=2)

    pruned = run_module(**args)
    assert pruned['venvs'] == ['0.5.23-bbbbbbbb'] and pruned['removed'] == [] and pruned['changed'] is True
    assert os.listdir(str(venvs)) == ['0.5.23-bbbbbbbb'] and os.listdir(str(caches)) == ['0.5.23-bbbbbbbb']
    assert run_module(**args)['changed'] is False
