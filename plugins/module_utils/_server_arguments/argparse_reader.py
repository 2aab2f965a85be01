# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read the options of ``parser.add_argument(...)`` calls from SGLang source, without importing it.

Importing SGLang pulls in torch, and its flags change between releases, so the source is read
with ``ast``: every ``add_argument`` call gives the option strings, the action, ``nargs``,
``type`` and ``choices``. Choices that name lists elsewhere (a module-level ``*_CHOICES`` list, a
list in an imported module, a class attribute, the result of a small helper function) are
evaluated from source as far as literals go; what needs running code is reported, not guessed.

The server (``sglang/srt/server_args.py`` up to 0.5.9) and the router (``router_args.py``) declare
their options this way; the declarative layout of later releases reuses the evaluator and the
option records defined here, so that every reader hands the same spec to the server rules.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import ast
import re


class SglangSourceError(Exception):
    """An SGLang source file cannot be read as a declaration of command line options."""


NO_VALUE_ACTIONS = ('store_true', 'store_false', 'store_const', 'count', 'help', 'version',
                    'BooleanOptionalAction')
_EVALUATED_CALLS = ('list', 'tuple', 'sorted', 'set', 'frozenset')
# "Deprecated. Use --x instead.", "(Deprecated: use --x=auto)", "Please use --x instead."
_REPLACEMENT = re.compile(r'\b[Uu]se\s+(--[A-Za-z0-9][^\s)]*(?:\s+<[^>]+>)?)')
_DEPRECATED_HELP = re.compile(r'^\W*deprecated\b', re.IGNORECASE)


def literal(node):
    """``(True, value)`` when the expression is a Python literal, else ``(False, None)``."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def describe(node):
    unparse = getattr(ast, 'unparse', None)
    if unparse is not None:
        return unparse(node)
    return 'expression at line %d' % getattr(node, 'lineno', 0)


def subscript_items(node):
    """The items between the brackets of ``X[a, b]`` (Python 3.8 wraps them in ``ast.Index``)."""
    inner = node.slice
    if type(inner).__name__ == 'Index':
        inner = inner.value
    return list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]


def last_name(node):
    """The name an expression ends in (``Literal`` for ``typing.Literal`` too); None when it is no name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class SourceModule:
    """Module-level names of one source file, evaluated lazily and only as far as literals go.

    ``import_resolver(module_name)`` returns the source text of another module (or None); modules
    read through it are shared in ``cache`` so that each file is parsed once.
    """

    def __init__(self, source, name, import_resolver=None, cache=None):
        try:
            self.tree = ast.parse(source)
        except SyntaxError as exc:
            raise SglangSourceError('cannot parse %s: %s' % (name, exc))
        self.name = name
        self.import_resolver = import_resolver
        self.cache = {} if cache is None else cache
        self.assignments = {}
        self.classes = {}
        self.functions = {}
        self.imports = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assignments[target.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assignments[node.target.id] = node.value
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module, alias.name)

    def module(self, module_name):
        """Another module through the resolver, or None when it is not there."""
        if module_name not in self.cache:
            source = self.import_resolver(module_name) if self.import_resolver is not None else None
            self.cache[module_name] = (
                SourceModule(source, module_name, self.import_resolver, self.cache) if source is not None else None)
        return self.cache[module_name]

    def _imported(self, local_name, imports=None):
        imports = self.imports if imports is None else imports
        if local_name not in imports:
            return None, None
        module_name, remote_name = imports[local_name]
        return self.module(module_name), remote_name

    def class_definition(self, name, depth=0):
        """``(module, ClassDef)`` of a class defined here or imported from a readable module."""
        if name in self.classes:
            return self, self.classes[name]
        module, remote_name = self._imported(name)
        if module is None or depth > 20:
            return None, None
        return module.class_definition(remote_name, depth + 1)

    def name_value(self, name, depth=0):
        if name in self.assignments:
            return self.evaluate(self.assignments[name], depth + 1)
        module, remote_name = self._imported(name)
        if module is not None:
            return module.name_value(remote_name, depth + 1)
        raise SglangSourceError('%s is not a literal in %s' % (name, self.name))

    def class_attribute(self, class_name, attribute, depth=0):
        module, node = self.class_definition(class_name)
        if node is None:
            raise SglangSourceError('class %s is not readable from %s' % (class_name, self.name))
        # Names in a class body see the earlier attributes of the class (``ALL = (FULL, DISABLED)``).
        scope = {}
        for item in node.body:
            if isinstance(item, ast.Assign):
                for target in item.targets:
                    if isinstance(target, ast.Name):
                        scope[target.id] = item.value
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                scope[item.target.id] = item.value
        if attribute not in scope:
            raise SglangSourceError('%s.%s is not defined in %s' % (class_name, attribute, module.name))
        return module.evaluate(scope[attribute], depth + 1, scope)

    def function_result(self, name, depth=0):
        """Value of a module-level helper called without arguments: its final ``return``.

        SGLang 0.5.23 computes the parser choices in helpers that return a registry's keys when a
        plugin has already imported it and otherwise, at the end, the list of built-in names kept
        in a dependency-free module; that last list is what a plain launch offers.
        """
        function = self.functions.get(name)
        if function is None or not function.body or not isinstance(function.body[-1], ast.Return) \
                or function.body[-1].value is None:
            raise SglangSourceError('%s() in %s does not end in a readable return' % (name, self.name))
        imports = {}
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    imports[alias.asname or alias.name] = ('import', node.module, alias.name)
        return self.evaluate(function.body[-1].value, depth + 1, imports)

    def _scoped_name(self, name, depth, scope):
        entry = scope[name]
        if isinstance(entry, tuple) and entry and entry[0] == 'import':
            module = self.module(entry[1])
            if module is None:
                raise SglangSourceError('%s is not readable from %s' % (entry[1], self.name))
            return module.name_value(entry[2], depth + 1)
        return self.evaluate(entry, depth + 1, scope)

    def evaluate(self, node, depth=0, scope=None):
        """Value of a choices expression, or SglangSourceError when it needs running code.

        ``scope`` maps local names (of a function or class body) to their expressions.
        """
        if depth > 30:
            raise SglangSourceError('choices nest too deep in %s' % self.name)
        scope = scope or {}
        ok, value = literal(node)
        if ok:
            return value
        if isinstance(node, ast.Name):
            if node.id in scope:
                return self._scoped_name(node.id, depth, scope)
            return self.name_value(node.id, depth)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    items.extend(self.evaluate(element.value, depth + 1, scope))
                else:
                    items.append(self.evaluate(element, depth + 1, scope))
            return items
        if isinstance(node, ast.Dict):
            keys = [self.evaluate(k, depth + 1, scope) for k in node.keys if k is not None]
            # Only the keys matter for choices; values are usually classes.
            return dict((k, None) for k in keys)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return list(self.evaluate(node.left, depth + 1, scope)) + list(self.evaluate(node.right, depth + 1, scope))
        if isinstance(node, ast.Call) and not node.keywords:
            func = node.func
            if isinstance(func, ast.Name) and func.id in _EVALUATED_CALLS and len(node.args) == 1:
                return list(self.evaluate(node.args[0], depth + 1, scope))
            if isinstance(func, ast.Name) and not node.args and func.id not in scope and func.id in self.functions:
                return self.function_result(func.id, depth + 1)
            if isinstance(func, ast.Attribute) and func.attr == 'keys' and not node.args:
                return list(self.evaluate(func.value, depth + 1, scope))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return self.class_attribute(node.value.id, node.attr, depth + 1)
        raise SglangSourceError('%s needs running code' % describe(node))

    def evaluate_choices(self, node, scope=None):
        """``(choices, None)`` or ``(None, expression)`` when the choices need running code."""
        try:
            choices = self.evaluate(node, scope=scope)
        except SglangSourceError:
            return None, describe(node)
        if isinstance(choices, (set, frozenset)):
            choices = sorted(choices, key=str)
        if isinstance(choices, (dict, tuple)):
            choices = list(choices)
        if not isinstance(choices, list):
            return None, describe(node)
        return choices, None

    def action_class(self, action_name):
        """What the source of a custom argparse Action class says about it (None when not readable).

        ``takes_no_value``: its ``__init__`` defaults or passes ``nargs=0`` (SGLang's deprecated
        actions do, so their ``add_argument`` calls show no ``nargs``). ``stores``: its
        ``__call__`` writes to the namespace; SGLang's ``DeprecatedAction`` only warns.
        """
        module, node = self.class_definition(action_name)
        if node is None:
            return None
        takes_no_value = False
        stores = False
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            if item.name == '__init__':
                arguments = item.args.args + item.args.kwonlyargs
                defaults = [None] * (len(item.args.args) - len(item.args.defaults)) + list(item.args.defaults) \
                    + list(item.args.kw_defaults)
                for argument, default in zip(arguments, defaults):
                    if argument.arg == 'nargs' and isinstance(default, ast.Constant) and default.value == 0:
                        takes_no_value = True
                for call in ast.walk(item):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                            and call.func.attr == '__init__':
                        for keyword in call.keywords:
                            if keyword.arg == 'nargs' and isinstance(keyword.value, ast.Constant) \
                                    and keyword.value.value == 0:
                                takes_no_value = True
            elif item.name == '__call__':
                stores = any(isinstance(call, ast.Call) and last_name(call.func) == 'setattr'
                             for call in ast.walk(item))
        return {'takes_no_value': takes_no_value, 'stores': stores}


def action_name(node):
    if node is None:
        return 'store'
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    name = last_name(node)
    return name if name is not None else describe(node)


def type_name(node):
    """``int``, ``json.loads``, ``human_readable_int``; None when there is no ``type=``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return '.'.join([node.id] + parts)


def deprecation(action, module, help_node, new_flag_node=None, error_node=None):
    """``deprecated``, ``replacement``, ``no_effect`` and ``removed`` of one option record.

    SGLang retires a flag with a deprecated action class (that names its replacement in
    ``new_flag=``, or stops the launch with ``error_message=``) or only says so at the start of
    its help text, as ``--enable-flashinfer-allreduce-fusion`` does in 0.5.23.
    """
    help_ok, help_text = literal(help_node) if help_node is not None else (False, None)
    help_text = help_text if help_ok and isinstance(help_text, str) else ''
    by_action = 'deprecat' in action.lower()
    info = {'deprecated': False, 'replacement': None, 'no_effect': False, 'removed': None}
    if error_node is not None:
        ok, message = literal(error_node)
        if not (ok and message is None):
            info['removed'] = message if ok and isinstance(message, str) else (
                'SGLang stops with an error when it is given')
            return info
    if not by_action and not _DEPRECATED_HELP.match(help_text):
        return info
    info['deprecated'] = True
    ok, replacement = literal(new_flag_node) if new_flag_node is not None else (False, None)
    if not (ok and isinstance(replacement, str)):
        found = _REPLACEMENT.search(help_text)
        replacement = found.group(1).rstrip('.,;') if found else None
    info['replacement'] = replacement
    if by_action:
        details = module.action_class(action)
        info['no_effect'] = details is not None and not details['stores']
    return info


def option_record(strings, dest, action, nargs, option_type, choices, unresolved, required, retired,
                  takes_value=True):
    """One option as every reader hands it to the server rules.

    ``BooleanOptionalAction`` adds the ``--no-`` spelling of each long option, as argparse does.
    """
    if action == 'BooleanOptionalAction':
        expanded = []
        for string in strings:
            expanded.append(string)
            if string.startswith('--'):
                expanded.append('--no-' + string[2:])
        strings = expanded
    long_strings = [s for s in strings if s.startswith('--')]
    record = {
        'option_strings': strings,
        'canonical': (long_strings or strings)[0],
        'dest': dest,
        'action': action,
        'takes_value': takes_value and action not in NO_VALUE_ACTIONS and nargs != 0,
        'nargs': nargs,
        'type': option_type,
        'choices': choices,
        'choices_unresolved': unresolved,
        'required': required,
    }
    record.update(retired)
    return record


def empty_spec():
    return {'options': {}, 'option_strings': {}}


def add_record(spec, record):
    canonical = record.pop('canonical')
    spec['options'][canonical] = record
    for string in record['option_strings']:
        spec['option_strings'][string] = canonical


def _function_locals(function_node):
    """Simple assignments inside add_cli_args (``x_choices = list(...)``), as expressions."""
    local_values = {}
    for node in ast.walk(function_node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            local_values[node.targets[0].id] = node.value
    return local_values


def add_argument_records(module):
    """Option records of the ``add_argument`` calls in the ``add_cli_args`` functions of a module.

    A module without ``add_cli_args`` is read whole.
    """
    scopes = [n for n in ast.walk(module.tree)
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == 'add_cli_args']
    if not scopes:
        scopes = [module.tree]
    records = []
    for scope in scopes:
        local_values = _function_locals(scope) if scope is not module.tree else {}
        for node in ast.walk(scope):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == 'add_argument'):
                continue
            strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            strings = [s for s in strings if s.startswith('-')]
            if not strings:
                continue
            keywords = dict((k.arg, k.value) for k in node.keywords if k.arg)
            action = action_name(keywords.get('action'))
            nargs_ok, nargs = literal(keywords['nargs']) if 'nargs' in keywords else (True, None)
            if not nargs_ok:
                nargs = None
            takes_value = True
            if 'nargs' not in keywords and action not in NO_VALUE_ACTIONS:
                details = module.action_class(action)
                takes_value = not (details and details['takes_no_value'])
            long_strings = [s for s in strings if s.startswith('--')]
            dest_ok, dest = literal(keywords['dest']) if 'dest' in keywords else (False, None)
            if not dest_ok or not isinstance(dest, str):
                dest = (long_strings or strings)[0].lstrip('-').replace('-', '_')
            choices, unresolved = None, None
            if 'choices' in keywords:
                choices, unresolved = module.evaluate_choices(keywords['choices'], local_values)
            required = literal(keywords['required'])[1] is True if 'required' in keywords else False
            retired = deprecation(action, module, keywords.get('help'), keywords.get('new_flag'),
                                  keywords.get('error_message'))
            records.append(option_record(strings, dest, action, nargs, type_name(keywords.get('type')),
                                         choices, unresolved, required, retired, takes_value))
    return records


def parse_argparse_source(source, import_resolver=None, name='server_args.py'):
    """Read the options of every ``add_argument`` call in an SGLang source file.

    ``import_resolver(module_name)`` returns the source text of another module (or None), so
    that choices such as ``list(ReasoningParser.DetectorMap.keys())`` can be read too.

    Returns ``{'options': {canonical: spec}, 'option_strings': {string: canonical}}``; a spec has
    ``option_strings``, ``dest``, ``action``, ``takes_value``, ``nargs``, ``type``, ``choices``
    (None when unrestricted), ``choices_unresolved`` (the expression when it could not be read),
    ``required``, ``deprecated``, ``replacement`` (the flag SGLang names instead), ``no_effect``
    (a deprecated flag that is only warned about) and ``removed`` (SGLang's message when it
    refuses the flag).
    """
    module = SourceModule(source, name, import_resolver)
    spec = empty_spec()
    for record in add_argument_records(module):
        add_record(spec, record)
    if not spec['options']:
        raise SglangSourceError('%s defines no command line options (no add_argument calls found)' % name)
    return spec


def read_field_defaults(source, class_name='ServerArgs', name='server_args.py'):
    """Literal defaults of the dataclass that holds the parsed arguments (dest -> value)."""
    module = SourceModule(source, name)
    if class_name not in module.classes:
        return {}
    return class_field_defaults(module.classes[class_name])


def class_field_defaults(class_node):
    defaults = {}
    for field in class_node.body:
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and field.value is not None:
            ok, value = literal(field.value)
            if ok:
                defaults[field.target.id] = value
    return defaults
