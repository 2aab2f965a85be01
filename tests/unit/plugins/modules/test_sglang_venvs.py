# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

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
