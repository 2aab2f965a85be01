# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Import a real SGLang release's server modules on a CPU, without its GPU-only dependencies.

Imported by sitecustomize.py next to it, so that putting this folder first on PYTHONPATH is
enough: the parser recorder (fixtures/sglang/real_parser/record.py) and the launcher's tests
against the real releases (test_sglang_launch_real_releases.py) run the release's code so.

The modules named in STUBBED become inert stand-ins: every attribute is another stand-in, a call
returns one (or, given a single function, returns the function, as a decorator would), capitalised
names are classes that can be subclassed, and a stand-in is false, zero, empty and no device is
available. Those are the GPU-only packages (torch, triton, sgl_kernel, tvm_ffi, torchvision:
gigabytes of CUDA libraries) and the packages of the parts of the server these tests never start
(the HTTP stack, the tokenizer backends, the model formats). Everything else the release imports
at start-up comes from the real packages, pinned in tests/unit/conftest.py: the argument parser,
ServerArgs, the model's config (transformers), the masking and dump code are the release's own.

A stand-in cannot compute: code that needs a tensor fails. What the tests run (parse the command
line, build ServerArgs on `--device cpu`, log, serve /server_info, dump) needs none.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import abc
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import re
import sys
import types

GPU_ONLY = ('torch', 'torchvision', 'triton', 'sgl_kernel', 'tvm_ffi')
NOT_STARTED = ('IPython', 'aiohttp', 'compressed_tensors', 'einops', 'fastapi', 'gguf', 'httpcore2', 'httpx2',
               'openai', 'sentencepiece', 'setproctitle', 'soundfile', 'starlette', 'uvicorn', 'xgrammar', 'zmq')
STUBBED = frozenset(GPU_ONLY + NOT_STARTED)
# What a CUDA build of torch answers on a machine without a GPU, where a stand-in would not do.
VALUES = {'torch.version.hip': None, 'torch.version.cuda': '12.8'}
# Backends that a CUDA build of torch does not have at all (hasattr() is how SGLang asks).
ABSENT = frozenset(('torch.npu', 'torch.hpu', 'torch.musa', 'torch.version.musa'))
# Raise as they do without a GPU driver, which SGLang catches to fall back to the CPU.
NO_DRIVER = frozenset(('triton.runtime.driver.active',))


def _decorated(args, kwargs):
    """The function a decorator stand-in was given, or None when the call is not a decoration."""
    if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], Inert):
        return args[0]
    return None


class InertMeta(abc.ABCMeta):
    """Classes of the stubbed packages: class attributes are stand-ins too."""

    def __getattr__(cls, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return Inert(cls.__name__ + '.' + name)


class InertBase(metaclass=InertMeta):
    """A class of a stubbed package (torch.nn.Module, transformers' configs...), as a base class."""

    def __init_subclass__(cls, **kwargs):
        pass

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return Inert(type(self).__name__ + '.' + name)

    def __call__(self, *args, **kwargs):
        return _decorated(args, kwargs) or Inert(type(self).__name__ + '()')

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema  # pylint: disable=import-error
        return core_schema.any_schema()


_CLASSES = {}


def _stand_in_class(path):
    if path not in _CLASSES:
        module, _dot, name = path.rpartition('.')
        _CLASSES[path] = InertMeta(name, (InertBase,), {'__module__': module})
    return _CLASSES[path]


class Inert(str):
    """Any other attribute of a stubbed package. A str (its dotted path), so that it can name an
    attribute or a dictionary key, but false and empty."""

    def __new__(cls, path='?'):
        return str.__new__(cls, path)

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        path = '%s.%s' % (str.__str__(self), name)
        if path in VALUES:
            return VALUES[path]
        if path in ABSENT:
            raise AttributeError(path)
        if path in NO_DRIVER:
            raise RuntimeError('%s: no GPU driver on this machine' % path)
        if name[:1].isupper():
            return _stand_in_class(path)
        return Inert(path)

    def __call__(self, *args, **kwargs):
        return _decorated(args, kwargs) or Inert(str.__str__(self) + '()')

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import core_schema  # pylint: disable=import-error
        return core_schema.any_schema()

    def __mro_entries__(self, bases):
        return (InertBase,)

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __len__(self):
        return 0

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __contains__(self, item):
        return False

    def __getitem__(self, key):
        return Inert(str.__str__(self) + '[]')

    def __setitem__(self, key, value):
        pass

    def __delitem__(self, key):
        pass

    def __setattr__(self, name, value):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def _same(self, *other):
        return self

    __neg__ = __pos__ = __abs__ = __invert__ = _same
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _same
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __matmul__ = _same
    __or__ = __ror__ = __and__ = __rand__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = _same

    def __repr__(self):
        return '<stand-in %s>' % str.__str__(self)


class InertModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return getattr(Inert(self.__name__), name)


def _pinned_torch():
    """The torch version that the SGLang release on the path requires (its wheel's METADATA)."""
    for folder in sys.path:
        try:
            names = os.listdir(folder or '.')
        except OSError:
            continue
        for name in names:
            if name.startswith('sglang-') and name.endswith('.dist-info'):
                with open(os.path.join(folder, name, 'METADATA')) as handle:
                    found = re.search(r'^Requires-Dist: torch==([^\s;]+)', handle.read(), re.M)
                if found:
                    return found.group(1)
    return '0'


class _TorchDistribution(importlib.metadata.Distribution):
    """Package metadata for the stand-in torch: transformers reads torch's version to decide whether
    to load its torch-based modules (the model configs need them)."""

    def read_text(self, filename):
        if filename == 'METADATA':
            return 'Metadata-Version: 2.1\nName: torch\nVersion: %s\n' % _pinned_torch()
        return None

    def locate_file(self, path):
        return path


class StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split('.')[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        if context.name in (None, 'torch'):
            yield _TorchDistribution()

    def create_module(self, spec):
        module = InertModule(spec.name)
        module.__path__ = []
        if '.' not in spec.name:
            module.__version__ = _pinned_torch() if spec.name == 'torch' else '0'
        return module

    def exec_module(self, module):
        pass


def install():
    if not any(isinstance(finder, StandIns) for finder in sys.meta_path):
        sys.meta_path.insert(0, StandIns())
