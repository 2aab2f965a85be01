# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""One server option and its value, applied as SGLang's parser applies them, and the server's own rules.

The options are the spec one of the readers gives (``installed_options``): names, aliases and
unique-prefix abbreviations, values, choices and ``nargs`` as argparse reads them; then the rules
SGLang adds (ports, tensor-parallel ranks against the node's GPUs). A secret's value is never shown.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import decimal
import difflib
import json
import re

from ansible_collections.inferops.serving.plugins.module_utils._secrets import SERVER_SECRET_DESTS

MULTI_VALUE_NARGS = ('+', '*')


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


def value_text(value):
    """A value as its text on the command line; None for true and false, which are no values."""
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
        if option['nargs'] not in MULTI_VALUE_NARGS and option['action'] != 'append':
            errors.append('%s takes one value, got a list; only one value would take effect' % canonical)
            return errors
        items = value
        if not items and option['nargs'] == '+':
            errors.append('%s needs at least one value' % canonical)
    else:
        items = [value]
    for item in items:
        text = value_text(item)
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


def resolve_settings(spec, merged, layer_names):
    """The merged settings (``layers.merge_layers``) as the installed SGLang's parser reads them.

    Returns ``(options, spellings, winning_layer, errors, notes)``: canonical option -> value, a removal
    kept as its false or null (the checks read it; the argv leaves it out); the option string to
    write for each (the alias the user chose, or the option an abbreviation expands to); the index of
    the layer each came from; what is wrong and what is worth saying, each naming its layer
    by its name in ``layer_names``. Two
    spellings that SGLang reads as one option (an abbreviation and the full name) are one option
    here too: the later layer wins, and in one layer they are an error.
    """
    options, spellings, written, winning_layer, value_errors = {}, {}, {}, {}, {}
    errors = []
    notes = []
    for setting in merged.values():
        layer, key, value = layer_names[setting.layer], setting.key, setting.value
        try:
            canonical, spelling, note = resolve_option(spec, key)
        except SglangServerArgsError as exc:
            if setting.removes:
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
        earlier = setting.repeated if setting.repeated is not None else (
            written[canonical] if winning_layer.get(canonical) == setting.layer else None)
        if earlier is not None:
            errors.append('%s: %s and %s set the same option %s' % (layer, earlier, key, canonical))
            continue
        if winning_layer.get(canonical, -1) > setting.layer:
            continue
        for message in value_errors.pop(canonical, []):
            errors.remove(message)
        options[canonical] = value
        spellings[canonical] = spelling
        written[canonical] = key
        winning_layer[canonical] = setting.layer
        value_errors[canonical] = ['%s: %s' % (layer, message) for message in check_value(canonical, option, value)]
        errors.extend(value_errors[canonical])
    return options, spellings, winning_layer, errors, notes


def whole_or_none(value):
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
        number = whole_or_none(value)
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
    gpus = whole_or_none(gpu_count)
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
    number = whole_or_none(value)
    if value is None or value is False:
        return None
    if number is None or not 1 <= number <= 65535:
        return '%s=%s must be a TCP port from 1 to 65535' % (canonical, value)
    return None
