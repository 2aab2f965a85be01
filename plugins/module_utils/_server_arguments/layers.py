# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server's layers of arguments merged once, for every reader.

The layers, lowest first: the topology's recommendations, the arguments the server role's own
settings stand for (``--enable-metrics``, ``--revision``), ``sglang_server_args``,
``sglang_server_extra_args`` and the node arguments of a replica across nodes. A later layer wins
per flag and ``false`` or ``null`` removes the flag. Flags are compared with the spellings the
collection itself reads (``--tp`` and ``--tensor-parallel-size`` are ``tp-size``; ``--model`` is
``model-path``).

``merge_layers`` is the merge. Readers without the installed SGLang (the topology's tensor-parallel
size, the input check's model path, Prometheus's scrape targets on another host) read its
``effective_arguments``; the server module resolves each merged setting with the installed
SGLang's parser (``command``), which keeps a removal so that its checks can see it.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from collections import namedtuple

# The names SGLang accepts for the options the collection reads, by their canonical flag.
ALIASES = {
    'tp': 'tp-size', 'tensor-parallel-size': 'tp-size',
    'pp': 'pp-size', 'pipeline-parallel-size': 'pp-size',
    'model': 'model-path',
}


class ServerArgumentsError(Exception):
    """An argument the collection reads has a value it cannot use."""


class Setting(namedtuple('Setting', 'key value layer repeated')):
    """The last word on one flag: the key as written, its value, the index of the layer that wrote it,
    and ``repeated``, the key the same layer wrote for this flag before (two spellings of one flag)."""

    @property
    def removes(self):
        return self.value is None or self.value is False


def flag_name(key):
    """``--tp_size``, ``tp-size`` and ``TP`` all name ``tp-size``."""
    flag = ('%s' % key).strip().lstrip('-').replace('_', '-').lower()
    return ALIASES.get(flag, flag)


def merge_layers(*layers):
    """Flag -> Setting after the layers, each later one winning; a removal is kept as the flag's Setting.

    A flag keeps the place where a layer first set it, so that the command line keeps its order
    when a later layer changes a value. Layers that are not mappings (an unset variable) count as empty.
    """
    merged = {}
    for index, layer in enumerate(layers):
        if not isinstance(layer, dict):
            continue
        for key, value in layer.items():
            flag = flag_name(key)
            earlier = merged.get(flag)
            repeated = earlier.key if earlier is not None and earlier.layer == index else None
            merged[flag] = Setting(key, value, index, repeated)
    return merged


def effective_arguments(*layers):
    """Flag -> value of what reaches the command line: the merge without the flags it removes."""
    return dict((flag, setting.value) for flag, setting in merge_layers(*layers).items() if not setting.removes)


def whole_number(flag, value):
    """The value of a flag that takes a whole number, or ServerArgumentsError saying what is wrong."""
    if isinstance(value, bool):
        raise ServerArgumentsError('--%s needs a number, got true' % flag)
    try:
        return int('%s' % value)
    except ValueError:
        raise ServerArgumentsError('--%s needs a whole number, got %r' % (flag, value))


def server_port(args, extra_args=None, default=None):
    """The port the server's arguments ask for (``default`` when they name none)."""
    value = effective_arguments(args, extra_args).get('port')
    return default if value is None else whole_number('port', value)


def role_arguments(enable_metrics=False, model_revision=''):
    """The layer the server role's own settings stand for, under ``sglang_server_args``."""
    layer = {}
    if enable_metrics:
        layer['enable-metrics'] = True
    if model_revision:
        layer['revision'] = model_revision
    return layer
