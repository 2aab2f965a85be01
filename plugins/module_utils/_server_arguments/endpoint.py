# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The model, the parallelism and the address the merged arguments give the server, as SGLang decides them."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.address import (
    is_loopback,
    server_address,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.option_checks import (
    normalize_key,
    whole_or_none,
)


def effective_value(spec, merged, flag, default=None):
    """Value of an option in the merged canonical mapping, by any of its names."""
    canonical = spec['option_strings'].get(normalize_key(flag))
    if canonical is None:
        return default
    value = merged.get(canonical)
    return default if value is None or value is False else value


def gpus_per_node(tp_size, pp_size=None, nnodes=None):
    """GPUs the server occupies on each node (``tp * pp / nnodes``, as check_tensor_parallel counts
    the ranks), or None when the values do not say (not whole numbers, uneven over the nodes)."""
    values = [1 if value is None or value is False else whole_or_none(value) for value in (tp_size, pp_size, nnodes)]
    if any(value is None or value < 1 for value in values):
        return None
    tp, pp, nodes = values
    return tp * pp // nodes if (tp * pp) % nodes == 0 else None


def server_endpoint(spec, merged, defaults):
    """Where the server will listen and which model name it will report, as SGLang decides it."""
    def pick(flag, dest):
        value = effective_value(spec, merged, flag)
        return defaults.get(dest) if value is None else value

    model_path = pick('--model-path', 'model_path')
    served = pick('--served-model-name', 'served_model_name') or model_path
    tp_size = pick('--tp-size', 'tp_size')
    port = pick('--port', 'port')
    result = {
        'model_path': model_path,
        'served_model_name': served,
        'tp_size': whole_or_none(tp_size) if tp_size is not None else None,
        'gpus_per_node': gpus_per_node(tp_size, pick('--pp-size', 'pp_size'), pick('--nnodes', 'nnodes')),
    }
    host = pick('--host', 'host')
    port = whole_or_none(port) if port is not None else None
    if port is None:
        # A port that is not a number was refused by the checks: there is nothing to probe.
        result.update(host=host, port=None, url=None, loopback=is_loopback(host))
    else:
        result.update(server_address(host, port))
    return result
