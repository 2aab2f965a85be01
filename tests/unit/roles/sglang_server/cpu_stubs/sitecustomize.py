# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Put this folder first on PYTHONPATH to import SGLang 0.5.9's tokenizer manager on a CPU.

Its import chain reaches sgl_kernel (mem_cache/memory_pool_host.py), whose wheel loads CUDA
libraries when imported. Nothing the launcher's tests run calls into it, so every sgl_kernel
module is an empty stand-in whose attributes are inert.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import importlib.abc
import importlib.machinery
import sys
import types


class _Inert(object):
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _Inert()

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())


class _InertModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _Inert()


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] == 'sgl_kernel':
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _InertModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _StandIns())
