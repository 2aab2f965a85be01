# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Check structured SGLang server arguments against the options an installed SGLang accepts.

The options come from one of the readers (``_sglang_argparse_reader`` for releases that
declare them with ``parser.add_argument``, ``_sglang_arg_groups_reader`` for the declarative
layout of 0.5.23 and later; ``_sglang_server_options`` picks the one that fits), which all give
the same spec. Here they are applied as argparse would: names, aliases and unique-prefix
abbreviations, values, choices and ``nargs``, then the server's own rules (secrets kept off the
command line, ports, tensor-parallel ranks against the node's GPUs) and the rendered argv.

Arguments are structured: ``{flag: value}`` where ``true`` is a bare flag, ``false``/``null``
leaves the flag out and a list gives several values.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import decimal
import difflib
import json
import re

from ansible_collections.inferops.serving.plugins.module_utils._secrets import SERVER_SECRET_DESTS
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments import (
    dropped_flags,
    is_loopback,
    server_address,
)
from ansible_collections.inferops.serving.plugins.module_utils._systemd_quote import (
    SystemdQuoteError,
    systemd_quote,
)

_MULTI_VALUE_NARGS = ('+', '*')


class SglangServerArgsError(Exception):
    """The given arguments cannot be used."""


def normalize_key(key):
    """``tp-size``, ``--tp-size`` -> ``--tp-size``."""
    if not isinstance(key, str) or not key.strip('-').strip():
        raise SglangServerArgsError('argument name %r is not a flag name' % (key,))
    return '--' + key.strip().lstrip('-')


def resolve_option(spec, key):
    """Canonical option for a flag name, matching argparse: exact name, alias, or unique prefix.

    Returns ``(canonical, spelling, note)``: spelling is the full option string to write, note
    explains an abbreviation. Raises on unknown/ambiguous flags.
    """
    flag = normalize_key(key)
    table = spec['option_strings']
    if flag in table:
        return table[flag], flag, None
    # argparse (allow_abbrev=True) accepts a prefix when exactly one option string starts with it;
    # several option strings of one action still count as ambiguous there.
    matches = sorted(s for s in table if s.startswith('--') and s.startswith(flag))
    if len(matches) == 1:
        return table[matches[0]], matches[0], '%s is accepted only as an abbreviation of %s' % (flag, matches[0])
    if len(matches) > 1:
        raise SglangServerArgsError('%s is ambiguous; it could be %s' % (flag, ', '.join(matches)))
    close = difflib.get_close_matches(flag, [s for s in table if s.startswith('--')], n=3)
    hint = ('; did you mean %s?' % ' or '.join(close)) if close else ''
    raise SglangServerArgsError('%s is not an option of this SGLang%s' % (flag, hint))


def _scalar_text(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(',', ':'))
    if isinstance(value, float):
        return repr(value)
    return str(value)


_SI_MULTIPLIERS = {'k': 10 ** 3, 'M': 10 ** 6, 'G': 10 ** 9, 'T': 10 ** 12}
_IEC_MULTIPLIERS = {'Ki': 2 ** 10, 'Mi': 2 ** 20, 'Gi': 2 ** 30, 'Ti': 2 ** 40}


def human_readable_int(text):
    """A token count as SGLang 0.5.23's ``human_readable_int`` reads it: ``128k``, ``1Mi``, ``4096``.

    SI suffixes may follow a decimal (``25.6k``), IEC suffixes only a whole number. ValueError
    for anything else, as SGLang's parser refuses it.
    """
    text = text.strip()
    match = re.match(r'^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)$', text)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC_MULTIPLIERS:
            if '.' in number:
                raise ValueError('decimals are not allowed with IEC suffixes like %s' % suffix)
            return int(number) * _IEC_MULTIPLIERS[suffix]
        return int(decimal.Decimal(number) * _SI_MULTIPLIERS[suffix])
    return int(text)


def _convert(type_name, text):
    """The value SGLang's parser makes of one value's text; ValueError where it refuses it."""
    if type_name == 'int':
        return int(text)
    if type_name == 'float':
        return float(text)
    if type_name == 'human_readable_int':
        return human_readable_int(text)
    if type_name in ('json.loads', 'json_list_type'):
        return json.loads(text)
    return text


_TYPE_WORDS = {'json.loads': 'JSON document', 'json_list_type': 'JSON document',
               'human_readable_int': 'whole number (a suffix k, M, G, T, Ki, Mi, Gi or Ti may follow it)'}


def _shown(option, value):
    if option['dest'] in SERVER_SECRET_DESTS:
        return '<hidden>'
    return value


def check_value(canonical, option, value):
    """Errors for one canonical option and its structured value (empty list when fine)."""
    errors = []
    if value is None or value is False:
        return errors
    if not option['takes_value']:
        if value is not True:
            errors.append('%s is a bare flag and takes no value; set it to true or false (got %r)'
                          % (canonical, _shown(option, value)))
        return errors
    if value is True:
        if option['nargs'] in ('?', '*'):
            return errors
        errors.append('%s needs a value; true only works for bare flags' % canonical)
        return errors
    if isinstance(value, list):
        if option['nargs'] not in _MULTI_VALUE_NARGS and option['action'] != 'append':
            errors.append('%s takes one value, got a list; only one value would take effect' % canonical)
            return errors
        items = value
        if not items and option['nargs'] == '+':
            errors.append('%s needs at least one value' % canonical)
    else:
        items = [value]
    for item in items:
        text = _scalar_text(item)
        if text is None:
            errors.append('%s=%r is not a value; true/false are only for bare flags' % (canonical, item))
            continue
        if any(c in text for c in '\r\n\0'):
            errors.append('%s has a value with a line break or NUL, which systemd cannot pass on one ExecStart='
                          ' line; put it on one line' % canonical)
            continue
        try:
            converted = _convert(option['type'], text)
        except ValueError:
            errors.append('%s=%s is not a valid %s' % (
                canonical, _shown(option, text), _TYPE_WORDS.get(option['type'], option['type'])))
            continue
        choices = option['choices']
        if choices is not None and converted not in choices and text not in [str(c) for c in choices]:
            errors.append('%s=%s is not valid; allowed: %s'
                          % (canonical, _shown(option, text), ', '.join(str(c) for c in choices)))
    return errors


def deprecation_note(spelling, option):
    """What SGLang does with a deprecated flag, as far as its source says."""
    note = '%s is deprecated in this SGLang' % spelling
    if option.get('no_effect'):
        note += ' and does nothing'
    if option.get('replacement'):
        note += '; use %s instead' % option['replacement']
    return note


def canonicalize(spec, args, layer='sglang_server_args'):
    """Map a structured layer to ``{canonical: value}``.

    Returns ``(mapping, spellings, errors, notes)``; spellings maps each canonical option to the
    full option string to write (the alias the user chose, or the option an abbreviation expands to).
    """
    mapping = {}
    spellings = {}
    origin = {}
    errors = []
    notes = []
    if args is None:
        return mapping, spellings, errors, notes
    if not isinstance(args, dict):
        errors.append('%s must be a mapping of flag -> value, got %s' % (layer, type(args).__name__))
        return mapping, spellings, errors, notes
    for key, value in args.items():
        try:
            canonical, spelling, note = resolve_option(spec, key)
        except SglangServerArgsError as exc:
            if value is None or value is False:
                # Removing what this SGLang does not have (an upgrade's overlay dropping a flag the old
                # release had) leaves the command line as it is.
                notes.append('%s: %s is removed (%s) and is not an option of this SGLang either'
                             % (layer, key, 'false' if value is False else 'null'))
                continue
            errors.append('%s: %s' % (layer, exc))
            continue
        option = spec['options'][canonical]
        if option['dest'] in SERVER_SECRET_DESTS:
            errors.append('%s: %s must not be set here (it would end up in the process command line); '
                          'set the vault-able variable sglang_server_api_key instead' % (layer, canonical))
            continue
        if option.get('removed'):
            errors.append('%s: %s was removed from this SGLang, which refuses it: %s'
                          % (layer, spelling, option['removed']))
            continue
        if note:
            notes.append('%s: %s; written as %s' % (layer, note, spelling))
        if option.get('deprecated'):
            notes.append('%s: %s' % (layer, deprecation_note(spelling, option)))
        if canonical in mapping:
            errors.append('%s: %s and %s set the same option %s' % (layer, origin[canonical], key, canonical))
            continue
        mapping[canonical] = value
        spellings[canonical] = spelling
        origin[canonical] = key
        for message in check_value(canonical, option, value):
            errors.append('%s: %s' % (layer, message))
    return mapping, spellings, errors, notes


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
            texts = [_scalar_text(item) for item in value]
            if any(t is None for t in texts):
                raise SglangServerArgsError('%s: true/false cannot be list items' % flag)
            if option is not None and option['nargs'] in _MULTI_VALUE_NARGS:
                argv.append(flag)
                argv.extend(texts)
            else:
                for text in texts:
                    argv.extend([flag, text])
            continue
        argv.extend([flag, _scalar_text(value)])
    return argv


def merge_layers(layers):
    """Later layers win per canonical option; returns an ordered dict-like mapping."""
    merged = {}
    for layer in layers:
        for canonical, value in layer.items():
            merged[canonical] = value
    return merged


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


def _whole(value):
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def check_tensor_parallel(tp_size, gpu_count, pp_size=1, nnodes=1):
    """Error text when the ranks one node starts do not fit its GPUs, else None.

    As SGLang counts them: ``--tp-size`` and ``--pp-size`` span every node, each of ``--nnodes``
    nodes starts ``tp * pp / nnodes`` ranks, and SGLang asserts ``tp * pp % nnodes == 0``.
    """
    values = {}
    for name, value in (('--tp-size', tp_size), ('--pp-size', pp_size), ('--nnodes', nnodes)):
        if value is None or value is False:
            value = 1
        number = _whole(value)
        if number is None:
            return '%s=%s is not a whole number' % (name, value)
        if number < 1:
            return '%s=%d must be at least 1' % (name, number)
        values[name] = number
    tp, pp, nodes = values['--tp-size'], values['--pp-size'], values['--nnodes']
    if (tp * pp) % nodes != 0:
        return ('--tp-size=%d x --pp-size=%d = %d ranks do not split evenly over --nnodes=%d'
                % (tp, pp, tp * pp, nodes))
    if gpu_count is None:
        return None
    gpus = _whole(gpu_count)
    if gpus is None or gpus < 1:
        return 'the node reports %s GPUs; the server needs GPUs' % (gpu_count,)
    per_node = tp * pp // nodes
    if per_node > gpus or gpus % per_node != 0:
        fitting = [str(n) for n in range(1, gpus + 1) if gpus % n == 0]
        if nodes == 1 and pp == 1:
            return ('--tp-size=%d does not divide into the %d GPUs of this node; use one of: %s'
                    % (tp, gpus, ', '.join(fitting)))
        return ('--tp-size=%d x --pp-size=%d over --nnodes=%d starts %d ranks per node, which does not divide'
                ' into the %d GPUs of this node; ranks per node (tp x pp / nnodes) must be one of: %s'
                % (tp, pp, nodes, per_node, gpus, ', '.join(fitting)))
    return None


def check_port(canonical, value):
    number = _whole(value)
    if value is None or value is False:
        return None
    if number is None or not 1 <= number <= 65535:
        return '%s=%s must be a TCP port from 1 to 65535' % (canonical, value)
    return None


def build_server_command(spec, args, extra_args=None, recommended_args=None, gpu_count=None):
    """Validate the layered arguments against a parsed spec and render the final argv.

    Precedence: topology recommendations < ``args`` < ``extra_args``. Returns a dict with
    ``argv``, ``args`` (flag as written -> value, false/None included), ``canonical_args``
    (the same keyed by canonical option string), ``errors``, ``notes``,
    ``unchecked`` (options whose allowed values could not be read from source) and
    ``from_topology`` (canonical flags that the recommendations filled in).
    """
    errors = []
    notes = []
    layers = []
    spellings = {}
    try:
        recommended = argv_from_topology(recommended_args)
    except SglangServerArgsError as exc:
        errors.append(str(exc))
        recommended = {}
    named_layers = (('recommended sglang args', recommended), ('sglang_server_args', args),
                    ('sglang_server_extra_args', extra_args))
    dropped = dropped_flags(*[layer for _name, layer in named_layers])
    for (name, layer), skip in zip(named_layers, dropped):
        if isinstance(layer, dict):
            layer = dict((key, value) for key, value in layer.items() if key not in skip)
        mapping, layer_spellings, layer_errors, layer_notes = canonicalize(spec, layer, name)
        errors.extend(layer_errors)
        notes.extend(layer_notes)
        layers.append(mapping)
        spellings.update(layer_spellings)
    merged = merge_layers(layers)
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
    from_topology = sorted(k for k in layers[0] if k not in layers[1] and k not in layers[2])

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
    values = [1 if value is None or value is False else _whole(value) for value in (tp_size, pp_size, nnodes)]
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
        'tp_size': _whole(tp_size) if tp_size is not None else None,
        'gpus_per_node': gpus_per_node(tp_size, pick('--pp-size', 'pp_size'), pick('--nnodes', 'nnodes')),
    }
    host = pick('--host', 'host')
    port = _whole(port) if port is not None else None
    if port is None:
        # A port that is not a number was refused by the checks: there is nothing to probe.
        result.update(host=host, port=None, url=None, loopback=is_loopback(host))
    else:
        result.update(server_address(host, port))
    return result
