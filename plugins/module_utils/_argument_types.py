# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role variable converted to the type its ``meta/argument_specs.yml`` declares, or refused in words.

``-e name=value`` makes every value text: ``-e sglang_server_start_timeout=60`` is the text "60",
``-e sglang_server_allow_root=false`` the text "false". A whole number, a number and a boolean
given as text are converted as Ansible converts them (the boolean words of Ansible's own
``boolean()``), so that the role's rules and the roles themselves see 60 and false. Text that is
not one ("soon", "maybe", an empty value) is refused.

A list or a mapping given as text is refused with the form that works: Ansible splits a list's
text at commas and reads a mapping's text as JSON or key=value pairs for its own check only, and the
role would read the text itself (a command line's variables outrank every fact a role could set).
On the command line a list or mapping goes in as JSON: ``-e '{"name": ["a", "b"]}'``.

Each message names the variable, the value given (a secret, ``no_log`` in the specs, only by its
length) and the form expected, one sentence per variable.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import math
import re

# Ansible's own boolean words (ansible.module_utils.parsing.convert_bool), compared in lower case.
TRUE_WORDS = ('y', 'yes', 'on', '1', 'true', 't')
FALSE_WORDS = ('n', 'no', 'off', '0', 'false', 'f')
_WHOLE = re.compile(r'^\s*[+-]?\d+\s*$')
_NUMBER = re.compile(r'^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$')

EXPECTED = {
    'str': 'a string', 'path': 'a path (a string)', 'int': 'a whole number', 'float': 'a number',
    'bool': 'true or false', 'list': 'a list', 'dict': 'a mapping (key: value)',
}
ELEMENTS = {
    'str': 'strings', 'path': 'paths', 'int': 'whole numbers', 'float': 'numbers', 'bool': 'booleans',
    'list': 'lists', 'dict': 'mappings (key: value)',
}


class _Refused(Exception):
    """A value that is not of the declared type (the message's words: what was given)."""


def kind(value, secret=False):
    """What a value is, as a user would say it; a secret only by its length."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'a boolean (%s)' % ('true' if value else 'false')
    if isinstance(value, dict):
        return 'a mapping'
    if isinstance(value, (list, tuple)):
        return 'a list'
    if secret:
        try:
            return 'a value of %d characters (hidden)' % len('%s' % value)
        except (TypeError, ValueError):
            return 'a value (hidden)'
    if isinstance(value, (int, float)):
        return 'the number %r' % value
    if isinstance(value, str):
        if not value.strip():
            return "an empty text ('')" if not value else 'white space only (%r)' % value
        text = repr(value)
        return 'the text %s' % (text if len(text) <= 60 else text[:57] + "...'")
    return 'a %s' % type(value).__name__


def _to_int(value):
    if isinstance(value, bool):
        raise _Refused()
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _WHOLE.match(value):
        return int(value)
    raise _Refused()


def _to_float(value):
    if isinstance(value, bool):
        raise _Refused()
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value  # an int is a number already, and its messages show it as given
    if isinstance(value, str) and _NUMBER.match(value) and math.isfinite(float(value)):
        return float(value)
    raise _Refused()


def _to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise _Refused()


def _to_str(value):
    if isinstance(value, str):
        return value
    # YAML reads `driver_branch: 580` or `hugepages: 1024` as a number: its digits are the text.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return '%s' % value
    raise _Refused()


def _to_list(value):
    if isinstance(value, (list, tuple)):
        return list(value)
    raise _Refused()


def _to_dict(value):
    if isinstance(value, dict):
        return value
    raise _Refused()


def _refuse_null():
    raise _Refused()


CONVERT = {
    'str': _to_str, 'path': _to_str, 'int': _to_int, 'float': _to_float, 'bool': _to_bool,
    'list': _to_list, 'dict': _to_dict,
}


def _command_line_form(type_name, text, secret):
    """The JSON a list's or mapping's text was probably meant as (a generic one for a secret)."""
    if type_name == 'list':
        items = [item.strip() for item in text.split(',') if item.strip()]
        return json.dumps(items) if items and not secret else '["a", "b"]'
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return json.dumps(parsed) if isinstance(parsed, dict) and not secret else '{"key": "value"}'


def _type_message(name, type_name, value, secret):
    message = '%s must be %s, got %s.' % (name, EXPECTED.get(type_name, type_name), kind(value, secret))
    if type_name in ('list', 'dict') and isinstance(value, str):
        message += (" On the command line give it as JSON: -e '{\"%s\": %s}'."
                    % (name, _command_line_form(type_name, value, secret)))
    elif type_name == 'bool' and isinstance(value, str):
        message = message[:-1] + ' (true, false, yes, no, on, off, 1 or 0).'
    return message


def convert(name, option, value):
    """``(value as its declared type, [])``, or ``(value, [message])`` when it is not one.

    None (YAML's null) stays None: what null means is each role's rule."""
    option = option or {}
    type_name = option.get('type', 'str')
    secret = bool(option.get('no_log'))
    if value is None or type_name not in CONVERT:
        return value, []
    try:
        converted = CONVERT[type_name](value)
    except _Refused:
        return value, [_type_message(name, type_name, value, secret)]
    element_type = option.get('elements')
    if type_name == 'list' and element_type in CONVERT:
        items = []
        for index, item in enumerate(converted):
            try:
                items.append(CONVERT[element_type](item) if item is not None else _refuse_null())
            except _Refused:
                return value, ['%s must be a list of %s; item %d is %s.'
                               % (name, ELEMENTS[element_type], index + 1, kind(item, secret))]
        converted = items
    choices = option.get('choices')
    if choices and type_name not in ('list', 'dict') and converted not in choices:
        return value, ['%s must be one of %s, got %s.' % (name, ', '.join('%s' % c for c in choices),
                                                          kind(value, secret))]
    return converted, []


def converted_values(options, values):
    """``(converted, problems)``: every variable of ``options`` (an entry point's options) that
    ``values`` (name -> value) holds, as its declared type; variables ``values`` lacks are left out."""
    converted, problems = {}, []
    for name in sorted(options or {}):
        if name in values:
            converted[name], wrong = convert(name, options[name], values[name])
            problems += wrong
    return converted, problems


def type_errors(options, values):
    """The messages of ``converted_values`` alone."""
    return converted_values(options, values)[1]
