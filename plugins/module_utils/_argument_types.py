# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role variable against the type its ``meta/argument_specs.yml`` declares, in words.

Ansible's own check answers a list given for a mapping with a conversion error naming its
internal classes, and turns a string into a list by splitting it at commas. A user needs the
variable, the type it takes and the type it got; this says exactly that, one sentence per
variable, and never repeats a value that is not a plain number or word (secrets stay out).

Numbers given as text (``-e name=8`` makes every value text) are taken where a number belongs,
as Ansible takes them; text that is no number is not.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

BOOLEAN_WORDS = ('yes', 'no', 'true', 'false', 'on', 'off', 'y', 'n', '1', '0')
_WHOLE = re.compile(r'^\s*[+-]?\d+\s*$')
_NUMBER = re.compile(r'^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$')
_WORD = re.compile(r'^[\w.+-]{1,40}$')

EXPECTED = {
    'str': 'a string', 'path': 'a path (a string)', 'int': 'a whole number', 'float': 'a number',
    'bool': 'true or false', 'list': 'a list', 'dict': 'a mapping (key: value)',
}


def kind(value):
    """What a value is, as a user would say it."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, (int, float)):
        return 'a number'
    if isinstance(value, str):
        shown = " '%s'" % value if _WORD.match(value) else ''
        return 'the text%s' % shown
    if isinstance(value, dict):
        return 'a mapping'
    if isinstance(value, (list, tuple)):
        return 'a list'
    return 'a %s' % type(value).__name__


def fits(value, type_name):
    """True when ``value`` is of (or converts without guessing to) the declared type."""
    if type_name in (None, 'raw'):
        return True
    if type_name in ('str', 'path'):
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    if type_name == 'int':
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return True
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, str) and bool(_WHOLE.match(value))
    if type_name == 'float':
        if isinstance(value, bool):
            return False
        return isinstance(value, (int, float)) or (isinstance(value, str) and bool(_NUMBER.match(value)))
    if type_name == 'bool':
        if isinstance(value, bool):
            return True
        if isinstance(value, int):
            return value in (0, 1)
        return isinstance(value, str) and value.strip().lower() in BOOLEAN_WORDS
    if type_name == 'list':
        return isinstance(value, (list, tuple))
    if type_name == 'dict':
        return isinstance(value, dict)
    return True


def option_errors(name, option, value):
    """Messages for one variable (empty when it is of its declared type and choices)."""
    option = option or {}
    type_name = option.get('type', 'str')
    if value is None:
        return []
    if not fits(value, type_name):
        return ['%s must be %s, got %s.' % (name, EXPECTED.get(type_name, type_name), kind(value))]
    if type_name == 'list' and option.get('elements'):
        bad = [i for i, item in enumerate(value) if item is not None and not fits(item, option['elements'])]
        if bad:
            return ['%s must be a list of %s; item %d is %s.' % (
                name, EXPECTED.get(option['elements'], option['elements']).replace('a ', '', 1), bad[0] + 1,
                kind(value[bad[0]]))]
    choices = option.get('choices')
    if choices and type_name not in ('list', 'dict') and value not in choices \
            and '%s' % value not in ['%s' % choice for choice in choices]:
        return ['%s must be one of %s, got %s.' % (name, ', '.join('%s' % c for c in choices), kind(value))]
    return []


def type_errors(options, values):
    """Every variable of ``options`` (an argument_specs entry point's options) that ``values``
    (name -> value) gives with another type; variables ``values`` lacks are not checked."""
    problems = []
    for name in sorted(options or {}):
        if name in values:
            problems += option_errors(name, options[name], values[name])
    return problems
