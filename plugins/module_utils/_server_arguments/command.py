# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The server's merged arguments checked against the options an installed SGLang accepts, and its argv.

The layers are merged once (``layers.merge_layers``); here each merged setting is resolved as the
installed SGLang's parser would (``option_checks``), the server's rules are applied (secrets kept
off the command line, required options, ports, tensor-parallel ranks against the node's GPUs)
and the argv is rendered.

Arguments are structured: ``{flag: value}`` where ``true`` is a bare flag, ``false``/``null``
leaves the flag out and a list gives several values.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import merge_layers
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.option_checks import (
    MULTI_VALUE_NARGS,
    SglangServerArgsError,
    check_port,
    check_tensor_parallel,
    normalize_key,
    resolve_settings,
    value_text,
)
from ansible_collections.inferops.serving.plugins.module_utils._systemd_quote import (
    SystemdQuoteError,
    systemd_quote,
)

# The layers lowest first, by the role variables they come from (errors and notes name them).
LAYERS = ('recommended sglang args', 'sglang_server_metrics / sglang_server_model_revision', 'sglang_server_args',
          'sglang_server_extra_args', 'sglang_server_node_args')


def render_argv(args, spec=None, spellings=None):
    """Structured args -> argv tokens: true -> bare flag, false/None -> left out, list -> repeated.

    With a spec, a list for an ``nargs='+'``/``'*'`` option becomes one flag followed by its values,
    because argparse keeps only the last occurrence of a repeated ``store`` option. ``spellings``
    maps a key to the option string to write.
    """
    argv = []
    for key, value in args.items():
        flag = normalize_key((spellings or {}).get(key, key))
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
            continue
        option = None
        if spec is not None and flag in spec['option_strings']:
            option = spec['options'][spec['option_strings'][flag]]
        if isinstance(value, list):
            texts = [value_text(item) for item in value]
            if any(t is None for t in texts):
                raise SglangServerArgsError('%s: true/false cannot be list items' % flag)
            if option is not None and option['nargs'] in MULTI_VALUE_NARGS:
                argv.append(flag)
                argv.extend(texts)
            else:
                for text in texts:
                    argv.extend([flag, text])
            continue
        argv.extend([flag, value_text(value)])
    return argv


def argv_from_topology(value):
    """Topology recommendations as a structured mapping (accepts a mapping or an argv list)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple)):
        mapping = {}
        current = None
        for token in value:
            token = str(token)
            if token.startswith('--'):
                if '=' in token:
                    name, text = token.split('=', 1)
                    mapping[name] = text
                    current = None
                else:
                    mapping[token] = True
                    current = token
            elif current is not None:
                if mapping[current] is True:
                    mapping[current] = token
                elif isinstance(mapping[current], list):
                    mapping[current].append(token)
                else:
                    mapping[current] = [mapping[current], token]
            else:
                raise SglangServerArgsError('recommended argument %r does not follow a flag' % token)
        return mapping
    raise SglangServerArgsError('recommended sglang arguments must be a mapping or a list, got %s'
                                % type(value).__name__)


def build_server_command(spec, args, extra_args=None, recommended_args=None, gpu_count=None,
                         role_args=None, node_args=None):
    """Validate the layered arguments against a parsed spec and render the final argv.

    Precedence (``LAYERS``): topology recommendations < ``role_args`` < ``args`` < ``extra_args`` <
    ``node_args``. Returns a dict with ``argv``, ``args`` (flag as written -> value, false/None
    included), ``canonical_args`` (the same keyed by canonical option string), ``errors``, ``notes``,
    ``unchecked`` (options whose allowed values could not be read from source) and
    ``from_topology`` (canonical flags that the recommendations filled in).
    """
    errors = []
    try:
        recommended = argv_from_topology(recommended_args)
    except SglangServerArgsError as exc:
        errors.append(str(exc))
        recommended = {}
    layers = (recommended, role_args, args, extra_args, node_args)
    for name, layer in zip(LAYERS, layers):
        if layer is not None and not isinstance(layer, dict):
            errors.append('%s must be a mapping of flag -> value, got %s' % (name, type(layer).__name__))
    merged, spellings, winning_layer, resolve_errors, notes = resolve_settings(spec, merge_layers(*layers), LAYERS)
    errors.extend(resolve_errors)
    for canonical, option in sorted(spec['options'].items()):
        if option.get('required') and (merged.get(canonical) in (None, False, True)
                                       or not str(merged.get(canonical)).strip()):
            errors.append('%s is required by SGLang and must not be empty; set it in sglang_server_args'
                          ' (got %r)' % (canonical, merged.get(canonical)))
    for flag in ('--port', '--nccl-port', '--metrics-port'):
        canonical = spec['option_strings'].get(flag)
        if canonical is not None and canonical in merged:
            message = check_port(canonical, merged[canonical])
            if message:
                errors.append(message)
    from_topology = sorted(k for k, layer in winning_layer.items() if layer == 0)

    unchecked = sorted(k for k in merged if merged[k] not in (None, False)
                       and spec['options'][k]['choices_unresolved'])

    def merged_value(*flags):
        for flag in flags:
            canonical = spec['option_strings'].get(flag)
            if canonical is not None:
                return merged.get(canonical, 1)
        return 1

    if spec['option_strings'].get('--tp-size') or spec['option_strings'].get('--tensor-parallel-size'):
        message = check_tensor_parallel(merged_value('--tp-size', '--tensor-parallel-size'), gpu_count,
                                        merged_value('--pp-size', '--pipeline-parallel-size'),
                                        merged_value('--nnodes'))
        if message:
            errors.append(message)

    argv = []
    if not errors:
        try:
            argv = render_argv(merged, spec, spellings)
            for token in argv:
                systemd_quote(token)
        except (SglangServerArgsError, SystemdQuoteError) as exc:
            errors.append(str(exc))
            argv = []
    return {
        'argv': argv,
        'canonical_args': merged,
        'args': dict((spellings[k][2:], v) for k, v in merged.items()),
        'errors': errors,
        'notes': notes,
        'unchecked': unchecked,
        'from_topology': from_topology,
    }
