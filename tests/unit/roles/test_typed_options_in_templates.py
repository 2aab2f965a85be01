# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles read a boolean or number option as its type, whatever form it was given in.

``-e sglang_sm120_allreduce_fusion_patch=false`` reaches the role as the text "false", which Jinja
takes as true; a command line's variables outrank any fact the input check could set. So every
Jinja expression of the roles and playbooks reads a boolean option through ``| bool`` and compares or
computes with a number option through ``| int`` or ``| float``; handed on whole (``"{{ name }}"`` to a
module argument, which converts it) or only tested for being defined, it needs neither.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import re

import yaml

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
JINJA = re.compile(r'\{\{(.*?)\}\}|\{%(.*?)%\}', re.S)
CONDITION_KEYS = ('when', 'that', 'changed_when', 'failed_when', 'until')
QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
ARITHMETIC = r'(<=|>=|<|>|\+|\*|/|-(?=\s))'


def _options_of_type(*type_names):
    names = set()
    for role in os.listdir(os.path.join(REPO_ROOT, 'roles')):
        with open(os.path.join(REPO_ROOT, 'roles', role, 'meta', 'argument_specs.yml')) as handle:
            specs = yaml.safe_load(handle)['argument_specs']
        for spec in specs.values():
            names.update(name for name, option in (spec.get('options') or {}).items()
                         if option.get('type', 'str') in type_names)
    return names


def _strings(node, key=None):
    """(key, text) of every string in a YAML document; a condition is an expression without braces."""
    if isinstance(node, dict):
        for child_key, child in node.items():
            yield from _strings(child, child_key)
    elif isinstance(node, list):
        for child in node:
            yield from _strings(child, key)
    elif isinstance(node, str):
        yield key, node


def _expressions():
    """(file, expression) for every Jinja expression of the roles and playbooks."""
    for top in ('roles', 'playbooks'):
        for folder, _dirs, names in sorted(os.walk(os.path.join(REPO_ROOT, top))):
            for name in sorted(names):
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, REPO_ROOT)
                if name.endswith('.j2'):
                    with open(path) as handle:
                        texts = [(None, handle.read())]
                elif name.endswith('.yml') and 'argument_specs' not in name and os.sep + 'defaults' + os.sep not in path:
                    with open(path) as handle:
                        texts = list(_strings(yaml.safe_load(handle)))
                else:
                    continue
                for key, text in texts:
                    if key in CONDITION_KEYS and '{{' not in text:
                        yield relative, text, False
                    for match in JINJA.finditer(text):
                        whole = text.strip() == match.group(0)
                        yield relative, match.group(1) or match.group(2), whole


def _bare_uses(names, typed, operators_only):
    found = []
    for path, expression, whole in _expressions():
        for name in names:
            if not re.search(r'\b%s\b' % name, expression):
                continue
            if whole and expression.strip() == name:
                continue  # handed on whole to a module argument or a variable
            # A name in quotes is text or a key (hostvars[host]['name']), not the variable.
            rest = QUOTED.sub("''", expression)
            rest = re.sub(r'\b%s\s*\|\s*(%s)\b' % (name, typed), '', rest)
            rest = re.sub(r"\b%s\s+if\s+%s\s+(is\s+defined|not\s+in\s+\[none,\s*''\])" % (name, name), '', rest)
            rest = re.sub(r'\b%s\s+is\s+(not\s+)?defined\b' % name, '', rest)
            if operators_only:
                bare = re.search(r'\b%s\b\s*%s|%s\s*\b%s\b' % (name, ARITHMETIC, ARITHMETIC, name), rest)
            else:
                bare = re.search(r'\b%s\b' % name, rest)
            if bare:
                found.append('%s: %s in {{ %s }}' % (path, name, ' '.join(expression.split())))
    return found


def test_boolean_options_are_read_through_bool():
    names = _options_of_type('bool')
    assert len(names) > 20
    assert _bare_uses(names, 'bool', operators_only=False) == []


def test_number_options_are_compared_and_computed_through_int_or_float():
    names = _options_of_type('int', 'float')
    assert len(names) > 40
    assert _bare_uses(names, 'int|float', operators_only=True) == []
