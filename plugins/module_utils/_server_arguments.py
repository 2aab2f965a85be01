# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server's effective arguments and where it answers, worked out once for every reader.

The server role merges its layers of arguments (the topology's recommendations, then
``sglang_server_args``, then ``sglang_server_extra_args``; a later layer wins per flag, ``false``
or ``null`` removes the flag) and checks them against the installed SGLang's own options
(``_sglang_server_args``). Readers that cannot see the installed SGLang - the topology's
tensor-parallel size, the input check's model path, Prometheus's scrape targets on another host -
read the same merge here, with the spellings the collection itself reads (``--tp`` and
``--tensor-parallel-size`` are ``tp-size``; ``--model`` is ``model-path``). Where the server
listens and the address that reaches it from the node itself are decided here too, for the
server role's checks and the published ``sglang_server_deployment``.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

# The names SGLang accepts for the options the collection reads, by their canonical flag.
ALIASES = {
    'tp': 'tp-size', 'tensor-parallel-size': 'tp-size',
    'pp': 'pp-size', 'pipeline-parallel-size': 'pp-size',
    'model': 'model-path',
}
# SGLang's own defaults for where it listens (ServerArgs: host 127.0.0.1, port 30000).
DEFAULT_HOST = '127.0.0.1'
DEFAULT_PORT = 30000
# Addresses that listen on every interface, and the loopback address that reaches each.
WILDCARD_HOSTS = {'0.0.0.0': '127.0.0.1', '': '127.0.0.1', '::': '::1'}
LOOPBACK_HOSTS = ('127.0.0.1', 'localhost', '::1')


class ServerArgumentsError(Exception):
    """An argument the collection reads has a value it cannot use."""


def flag_name(key):
    """``--tp_size``, ``tp-size`` and ``TP`` all name ``tp-size``."""
    flag = ('%s' % key).strip().lstrip('-').replace('_', '-').lower()
    return ALIASES.get(flag, flag)


def effective_arguments(*layers):
    """Flag -> value after the layers, each later one winning; ``false`` or ``null`` removes a flag.

    Layers that are not mappings (an unset variable) count as empty.
    """
    merged = {}
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        for key, value in layer.items():
            flag = flag_name(key)
            if value is None or value is False:
                merged.pop(flag, None)
            else:
                merged[flag] = value
    return merged


def dropped_flags(*layers):
    """For each layer, the keys that never reach the command line because a later layer removes them
    (``false`` or ``null`` last): a flag an upgrade's overlay removes (one the new SGLang no longer
    has) is not checked against that SGLang in the layer below it."""
    final = {}
    for index, layer in enumerate(layers):
        if isinstance(layer, dict):
            for key, value in layer.items():
                final[flag_name(key)] = (index, value is None or value is False)
    dropped = []
    for index, layer in enumerate(layers):
        keys = set()
        if isinstance(layer, dict):
            for key in layer:
                last, removed = final[flag_name(key)]
                if removed and last > index:
                    keys.add(key)
        dropped.append(keys)
    return dropped


def whole_number(flag, value):
    """The value of a flag that takes a whole number, or ServerArgumentsError saying what is wrong."""
    if isinstance(value, bool):
        raise ServerArgumentsError('--%s needs a number, got true' % flag)
    try:
        return int('%s' % value)
    except ValueError:
        raise ServerArgumentsError('--%s needs a whole number, got %r' % (flag, value))


def is_loopback(host):
    """Whether a server bound to ``host`` can only be reached from the node itself."""
    return host in LOOPBACK_HOSTS or ('%s' % host).startswith('127.')


def probe_url(host, port):
    """The URL that reaches a server bound to ``host``:``port`` from the node itself."""
    address = WILDCARD_HOSTS.get(host, host)
    return 'http://%s:%s' % (('[%s]' % address) if ':' in address else address, port)


def server_address(host=None, port=None):
    """Where the server listens (SGLang's defaults filling what is unset) and how the node reaches it."""
    host = DEFAULT_HOST if host is None else '%s' % host
    port = DEFAULT_PORT if port is None else whole_number('port', port)
    return {'host': host, 'port': port, 'url': probe_url(host, port), 'loopback': is_loopback(host)}


def server_port(args, extra_args=None, default=None):
    """The port the server's arguments ask for (``default`` when they name none)."""
    value = effective_arguments(args, extra_args).get('port')
    return default if value is None else whole_number('port', value)
