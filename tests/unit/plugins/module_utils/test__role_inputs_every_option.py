# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every documented option of every role entry point, in every form a user can give it.

Generated from the roles' meta/argument_specs.yml: each option is given, over the values the role
ships, as the text ``-e name=value`` makes of a usable value, as YAML's natural value, as each other
type (a list, a mapping, a boolean, a number), empty, null, outside its choices, and as text that no
type takes. The check (``role_errors``, what ``inferops.serving.role_inputs`` runs) never raises;
what it refuses it refuses by the option's name, and a value of the wrong type with the value given
and the form expected. Where Ansible's own argument check refuses a value, so does the role's.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.inferops.serving.plugins.module_utils._argument_types import converted_values, kind
from ansible_collections.inferops.serving.plugins.module_utils._inputs import ROLES, role_errors

ROLES_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles'))
# A templated default stands for a value of its type that the role's rules take.
STAND_INS = {'str': 'templated', 'path': '/templated', 'int': 1, 'float': 0.5, 'bool': False, 'list': [], 'dict': {}}
# What the inventory sets on a GPU VM for the Proxmox role's per-VM entry points (the defaults are the host's).
GPU_VM_HOST_VARIABLES = {'proxmox_gpu_vm_vmid': 100, 'proxmox_gpu_vm_gpus': [{'host': '0000:81:00.0'}]}
WRONG_TYPES = {'a list': ['x'], 'a mapping': {'x': 1}, 'a boolean': True, 'a number': 12345, 'a fraction': 2.5}
ODD_TEXTS = ['maybe', '-1', '0', '1.5', 'a,b', '{"a": 1}', '[1, 2]', 'k=v', 'nan', ' ', 'yes', '1e400', '0x10',
             'root', '/', 'a\nb', 'x' * 300, '%s', '{{ x }}', '-0', '65536', '100%', '0%', '5s']
# Values of the right type with odd contents.
ODD_ITEMS = {
    'list': [[None], [''], [1], [True], [{'a': 1}], [['a']], ['x', 'x'], ['/a', 'b'], ['-/run/x'], list(range(20))],
    'dict': [{'x': None}, {'x': [1]}, {'x': {'y': 1}}, {1: 'a'}, {'': ''}, {'A': 'a\nb'}, {'model-path': ''},
             {'port': 'http'}, {'HF_TOKEN': 'x'}, {'api-key': 'secret-value'}, {'0.5.9': {}}, {'x': True}],
    'int': [0, -1, 65535, 65536, 10 ** 30],
    'float': [0, 0.0, 1, -0.5, 1e308],
}


def _read_yaml(*parts):
    with open(os.path.join(ROLES_DIR, *parts)) as handle:
        return yaml.safe_load(handle) or {}


def _checked_entry_points(role):
    """The entry points whose options the role's tasks check (inferops.serving.role_inputs)."""
    checked = set()
    for folder, _dirs, names in os.walk(os.path.join(ROLES_DIR, role, 'tasks')):
        for name in names:
            for task in _read_yaml(folder, name) if name.endswith('.yml') else []:
                if 'inferops.serving.role_inputs' in task:
                    checked.add((task['inferops.serving.role_inputs'] or {}).get('entry_point', 'main'))
    return sorted(checked)


def _entry_points():
    for role in sorted(ROLES):
        specs = _read_yaml(role, 'meta', 'argument_specs.yml')['argument_specs']
        defaults = _read_yaml(role, 'defaults', 'main.yml')
        for entry_point in _checked_entry_points(role):
            options = specs[entry_point].get('options') or {}
            base = dict((name, STAND_INS[options[name].get('type', 'str')]
                         if isinstance(defaults.get(name), str) and '{{' in defaults[name] else defaults.get(name))
                        for name in options)
            if role == 'proxmox_gpu_vm':
                base.update((name, value) for name, value in GPU_VM_HOST_VARIABLES.items() if name in options)
            yield role, entry_point, options, base


ENTRY_POINTS = list(_entry_points())


def command_line_text(value):
    """What ``-e name=value`` hands the role for a value a user means."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return '' if value is None else '%s' % value


def forms(option, value):
    """(form, value given, must it be refused) for one option whose usable value is ``value``."""
    type_name = option.get('type', 'str')
    rows = [('natural', value, False)]
    if value is not None:
        # Text of a list or mapping is refused (the role would read the text), any other text is taken.
        rows.append(('-e text', command_line_text(value), type_name in ('list', 'dict')))
    for label, wrong in WRONG_TYPES.items():
        number = label in ('a number', 'a fraction')
        takes = ((type_name in ('str', 'path', 'float') and number) or (type_name == 'int' and label == 'a number')
                 or (type_name == 'list' and label == 'a list') or (type_name == 'dict' and label == 'a mapping')
                 or (type_name == 'bool' and label == 'a boolean'))
        rows.append((label, wrong, not takes))
    rows.append(('empty', '', type_name not in ('str', 'path')))
    rows.append(('null', None, False))
    rows += [('text %r' % text, text, None) for text in ODD_TEXTS]
    rows += [('odd %r' % odd, odd, None) for odd in ODD_ITEMS.get(type_name, [])]
    if type_name == 'bool':
        rows.append(('not a boolean', 'maybe', True))
    if option.get('choices'):
        rows.append(('outside the choices', 'not-%s' % option['choices'][0], True))
        rows += [('choice %r' % choice, choice, False) for choice in option['choices']]
    return rows


CASES = [(role, entry_point, name, form, given, refused)
         for role, entry_point, options, base in ENTRY_POINTS
         for name in sorted(options)
         for form, given, refused in forms(options[name], base.get(name))]


def test_every_documented_option_of_every_entry_point_is_tried():
    """An entry point without a check of its own (the serving role's report, sort, ...) declares a part of the
    options its role checks, with the same spec."""
    tried = dict(((role, name), options[name]) for role, _entry_point, options, _base in ENTRY_POINTS
                 for name in options)
    for role in sorted(ROLES):
        for entry_point, spec in _read_yaml(role, 'meta', 'argument_specs.yml')['argument_specs'].items():
            for name, option in (spec.get('options') or {}).items():
                assert tried.get((role, name)) == option, (role, entry_point, name)
    assert len(CASES) > 7500


@pytest.mark.parametrize('role, entry_point, options, base', ENTRY_POINTS,
                         ids=['%s:%s' % (row[0], row[1]) for row in ENTRY_POINTS])
def test_what_the_role_ships_passes(role, entry_point, options, base):
    assert role_errors(role, options, base, entry_point) == []


def _option_refusals(role, entry_point, options, base, name, given):
    values = dict(base, **{name: given})
    problems = role_errors(role, options, values, entry_point)
    return problems, [problem for problem in problems if name in problem]


@pytest.mark.parametrize('role, entry_point, options, base', ENTRY_POINTS,
                         ids=['%s:%s' % (row[0], row[1]) for row in ENTRY_POINTS])
def test_every_form_of_every_option_is_taken_or_refused_by_name(role, entry_point, options, base):
    """All forms of all options of one entry point (thousands of checks, a second in all)."""
    wrong = []
    for name in sorted(options):
        for form, given, must_refuse in forms(options[name], base.get(name)):
            try:
                problems, naming = _option_refusals(role, entry_point, options, base, name, given)
            except Exception as exc:  # the point of the test: no value makes the check raise
                wrong.append('%s=%r (%s): raised %r' % (name, given, form, exc))
                continue
            if problems and not naming:
                wrong.append('%s=%r (%s): refused without naming it: %s' % (name, given, form, problems))
            if must_refuse and not problems:
                expected = options[name].get('type', 'str')
                wrong.append('%s=%r (%s): taken, but it is not of type %s' % (name, given, form, expected))
            if must_refuse is False and form in ('natural', '-e text') and problems:
                wrong.append('%s=%r (%s): a usable value, refused: %s' % (name, given, form, problems))
    assert wrong == []


@pytest.mark.parametrize('role, entry_point, options, base', ENTRY_POINTS,
                         ids=['%s:%s' % (row[0], row[1]) for row in ENTRY_POINTS])
def test_a_value_of_the_wrong_type_is_refused_with_the_value_and_the_form_expected(role, entry_point, options, base):
    wrong = []
    for name in sorted(options):
        option = options[name]
        for form, given, _refused in forms(option, base.get(name)):
            problems = converted_values({name: option}, {name: given})[1]
            if not problems:
                continue
            message = problems[0]
            shown = kind(given, bool(option.get('no_log')))
            if not message.startswith(name + ' must be ') or shown not in message:
                wrong.append('%s=%r (%s): %s' % (name, given, form, message))
            if option.get('no_log') and isinstance(given, str) and len(given) > 3 and given in message:
                wrong.append('%s=%r (%s): shows a secret: %s' % (name, given, form, message))
    assert wrong == []


@pytest.mark.parametrize('role, entry_point, options, base', ENTRY_POINTS,
                         ids=['%s:%s' % (row[0], row[1]) for row in ENTRY_POINTS])
def test_what_ansible_refuses_the_role_refuses_too(role, entry_point, options, base):
    """Run through an entry point, Ansible's own check answers first; reached through a task file that is no
    entry point (the plan runs tasks_from: inputs), the role's check must refuse the same values."""
    wrong = []
    for name in sorted(options):
        spec = dict((key, value) for key, value in options[name].items() if key in ('type', 'elements', 'choices'))
        validator = ArgumentSpecValidator({name: spec})
        for form, given, _refused in forms(options[name], base.get(name)):
            if given is None or not validator.validate({name: given}).error_messages:
                continue
            problems, naming = _option_refusals(role, entry_point, options, base, name, given)
            if not naming:
                wrong.append('%s=%r (%s): Ansible refuses it, the role takes it: %s' % (name, given, form, problems))
    assert wrong == []
