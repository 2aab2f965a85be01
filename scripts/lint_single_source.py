# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of scripts/lint_roles.py that keep two things in one place each.

* The secret names: plugins/module_utils/_secrets.py defines them. Outside it, no Python file
  under plugins/ assigns a name containing SECRET, nor writes a secret name (``api_key``,
  ``admin-api-key``, ``HF_TOKEN``, in any case and with dashes or underscores: ``hf-token`` too) as a constant
  that defines it: an element of a tuple, list or set, a key of a dict whose value is a constant,
  a keyword of ``dict()`` with a constant, a word of a string that is split into names, or the
  value of an assignment. A dict that carries a secret's value under its name (a request body)
  uses the secret and passes.
* The server's argument layers (the topology's recommendations, ``sglang_server_args``,
  ``sglang_server_extra_args``, ``sglang_server_node_args``): merged once, by
  ``_server_arguments.layers.merge_layers``, for every reader. Outside it, Python that merges a
  mapping with the extra or the node layer (a name holding ``extra_args`` or ``node_args``, or one
  assigned or looped from it) fails, in every spelling a merge takes: ``{**a, **b}``,
  ``dict(a, **b)``, ``a | b``, ``a |= b``, ``.update()``, ``ChainMap``, or a loop that stores each
  of its items. So does Jinja in the roles, playbooks, inventories and scenarios that
  ``combine``s with ``sglang_server_extra_args`` or ``sglang_server_node_args`` or with a variable
  set from them, on either side of the ``combine`` and however the expression is split over lines.
"""

import ast
import glob
import os
import re
import runpy

import yaml

# libyaml's loaders where PyYAML has them: the same documents, parsed several times faster.
SAFE_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
BASE_LOADER = getattr(yaml, 'CBaseLoader', yaml.BaseLoader)
MODULE_UTILS = os.path.join('plugins', 'module_utils')
SECRETS_MODULE = os.path.join(MODULE_UTILS, '_secrets.py')
# The lists of the secrets module that hold exact names. Its words and markers (``secret``,
# ``TOKEN``) are matched inside other names and are too common to look for on their own.
SECRET_NAME_LISTS = ('SERVER_SECRET_DESTS', 'SERVER_SECRET_FLAGS', 'ROUTER_SECRET_DESTS', 'SECRET_ENV_NAMES')

# (file, function) of the one merge of the server's argument layers; the parser-resolved view the
# server module checks is derived from its result (_server_arguments.option_checks.resolve_settings).
ARGUMENT_MERGER = ('plugins/module_utils/_server_arguments/layers.py', 'merge_layers')
# The layers over the others, as Python names them; pip's extra arguments are a list of pip options.
EXTRA_LAYER = re.compile(r'(?<!pip_)(extra|node)_args')
# Calls whose result is (part of) the mapping they are given.
LAYER_READERS = ('get', 'pop', 'copy', 'items', 'values', 'keys', 'setdefault')
LAYER_COPIES = ('dict', 'copy', 'deepcopy', 'list', 'sorted', 'OrderedDict')
JINJA_LAYERS = ('sglang_server_extra_args', 'sglang_server_node_args')
JINJA_EXPRESSION = re.compile(r'\{\{.*?\}\}|\{%.*?%\}', re.S)
JINJA_SET = re.compile(r'\{%-?\s*set\s+(\w+)\s*=(.*?)-?%\}', re.S)


def _spelling(name):
    """A secret's name as compared: SGLang reads api_key, api-key and API_KEY as one option, and a
    copy of HF_TOKEN written as hf_token or Hf-Token is still a second list of it. Whole names are
    compared, so a longer name that holds one (sglang_router_admin_api_key) is another thing."""
    return name.replace('-', '_').lower()


class SecretNames:
    """The exact secret names of the secrets module, as compared (see _spelling). A role variable
    spelled as one of them (sglang_router_admin_api_key, the user's key for the environment
    variable SGLANG_ROUTER_ADMIN_API_KEY) names where a secret comes from, not which names are
    secret, so its exact spelling passes."""

    def __init__(self, root):
        found = runpy.run_path(os.path.join(root, SECRETS_MODULE))
        self.names = set(_spelling(name) for list_name in SECRET_NAME_LISTS for name in found[list_name])
        self.role_variables = set()
        for defaults in glob.glob(os.path.join(root, 'roles', '*', 'defaults', 'main.yml')):
            with open(defaults) as handle:
                self.role_variables.update(yaml.load(handle, Loader=SAFE_LOADER) or {})

    def holds(self, text):
        return _spelling(text) in self.names and text not in self.role_variables


def python_files(root, top):
    for folder, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = sorted(name for name in dirs if name != '__pycache__')
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.join(folder, name)


def _assigned_names(node):
    """Names an assignment binds: ``A = ...``, ``A, B = ...``, ``self.A = ...``."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store):
                yield part.id
            elif isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store):
                yield part.attr


def _is_constant(node):
    return isinstance(node, ast.Constant) or (
        isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in node.elts))


def _secret_constants(node, names):
    """The secret names ``node`` defines as constants (see the module's docstring)."""
    def secret(value):
        return isinstance(value, ast.Constant) and isinstance(value.value, str) and names.holds(value.value)

    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if secret(e)]
    if isinstance(node, ast.Dict):
        return [k.value for k, v in zip(node.keys, node.values) if k is not None and secret(k) and _is_constant(v)]
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == 'dict':
            return [k.arg for k in node.keywords if k.arg and names.holds(k.arg) and _is_constant(k.value)]
        if (isinstance(func, ast.Attribute) and func.attr == 'split' and isinstance(func.value, ast.Constant)
                and isinstance(func.value.value, str)):
            return [w for w in re.split(r'[\s,;]+', func.value.value) if names.holds(w)]
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and secret(node.value):
        return [node.value.value]
    return []


def check_secret_lists(root):
    if not os.path.exists(os.path.join(root, SECRETS_MODULE)):
        return []
    names = SecretNames(root)
    problems = []
    for path in python_files(root, 'plugins'):
        relative = os.path.relpath(path, root)
        if relative == SECRETS_MODULE:
            continue
        with open(path) as handle:
            tree = ast.parse(handle.read(), relative)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                # Upper case only: constants are named so, and locals such as `secret = ...` hold no list.
                for name in _assigned_names(node):
                    if 'SECRET' in name:
                        problems.append('%s:%d defines %s: secret names are defined once, in %s; import them'
                                        ' from there' % (relative, node.lineno, name, SECRETS_MODULE))
            listed = sorted(set(_secret_constants(node, names)))
            if listed:
                problems.append('%s:%d lists the secret name(s) %s: import the list from %s instead'
                                % (relative, node.lineno, ', '.join(listed), SECRETS_MODULE))
    return problems


class _LayerMerges(ast.NodeVisitor):
    """Merges of the extra argument layer in one scope (a module or a function, nested ones apart)."""

    def __init__(self, scope):
        self.layers = set()
        nodes = list(_scope_nodes(scope))
        # Names assigned or looped from a layer are layers too, however many hops away.
        changed = True
        while changed:
            changed = False
            for node in nodes:
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                    value, targets = node.value, (node.targets if isinstance(node, ast.Assign) else [node.target])
                elif isinstance(node, (ast.For, ast.comprehension)):
                    value, targets = node.iter, [node.target]
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    value, targets = node.context_expr, [node.optional_vars]
                else:
                    continue
                if value is None or not self.mentions(value):
                    continue
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in self.layers:
                            self.layers.add(name.id)
                            changed = True
        self.merges = [node.lineno for node in nodes if self.merges_a_layer(node)]

    def mentions(self, node):
        """Whether ``node`` reads the extra layer: by name, as a key, or through a copy or ``.get``.

        A call of any other function returns a value of its own (``effective_arguments(args,
        extra_args)`` is the merged result, not the layer), so its arguments are not followed.
        """
        if isinstance(node, ast.Name):
            return bool(EXTRA_LAYER.search(node.id)) or node.id in self.layers
        if isinstance(node, ast.arg):
            return bool(EXTRA_LAYER.search(node.arg))
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and bool(EXTRA_LAYER.search(node.value))
        if isinstance(node, ast.Attribute):
            return bool(EXTRA_LAYER.search(node.attr)) or self.mentions(node.value)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in LAYER_READERS:
                return self.mentions(func.value) or any(self.mentions(a) for a in node.args)
            if isinstance(func, ast.Name) and func.id in LAYER_COPIES:
                return any(self.mentions(a) for a in node.args) or any(self.mentions(k.value) for k in node.keywords)
            return False
        return any(self.mentions(child) for child in ast.iter_child_nodes(node))

    def merges_a_layer(self, node):
        if isinstance(node, ast.Dict):
            unpacked = [v for k, v in zip(node.keys, node.values) if k is None]
            return len(node.keys) > 1 and any(self.mentions(v) for v in unpacked)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ''
            operands = list(node.args) + [k.value for k in node.keywords]
            if name in ('dict', 'ChainMap', 'OrderedDict'):
                return len(operands) > 1 and any(self.mentions(o) for o in operands)
            if name == 'update' and isinstance(func, ast.Attribute):
                return any(self.mentions(o) for o in operands) or (operands and self.mentions(func.value))
            return False
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.mentions(node.left) or self.mentions(node.right)
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.BitOr):
            return self.mentions(node.value) or self.mentions(node.target)
        if isinstance(node, ast.For) and self.mentions(node.iter):
            # A loop over a layer that stores what it reads under a key: a merge written out.
            return any(isinstance(t, ast.Subscript) for stmt in ast.walk(node) if isinstance(stmt, ast.Assign)
                       for t in stmt.targets)
        if isinstance(node, ast.DictComp):
            return any(self.mentions(g.iter) for g in node.generators) and len(node.generators) > 1
        return False


def _scope_nodes(scope):
    """Every node of ``scope`` but those of the functions and classes defined in it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def python_argument_merges(root):
    problems = []
    for path in python_files(root, 'plugins'):
        relative = os.path.relpath(path, root).replace(os.sep, '/')
        with open(path) as handle:
            tree = ast.parse(handle.read(), relative)
        scope_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, scope_types)]
        for scope in scopes:
            if (relative, getattr(scope, 'name', None)) == ARGUMENT_MERGER:
                continue
            for line in _LayerMerges(scope).merges:
                problems.append('%s:%d merges the server arguments itself: use _server_arguments.layers.'
                                'merge_layers' % (relative, line))
    return sorted(set(problems), key=lambda p: (p.split(':')[0], int(p.split(':')[1].split(' ')[0])))


def _variables(value, defines=False):
    """(name, string) of each variable a parsed YAML document sets to a string: the keys of a
    ``vars`` or ``set_fact`` mapping, or every top-level key where ``defines`` (defaults, vars,
    group_vars). A module's own options (``extra_args:`` of a task) set no variable."""
    if isinstance(value, dict):
        for key, item in value.items():
            if defines and isinstance(item, str):
                yield key, item
            sets = key in ('vars', 'set_fact', 'ansible.builtin.set_fact')
            yield from _variables(item, sets)
    elif isinstance(value, list):
        for item in value:
            yield from _variables(item)


def _defines_variables(path):
    parts = path.replace(os.sep, '/').split('/')
    return any(part in ('defaults', 'vars', 'group_vars', 'host_vars') for part in parts[:-1])


def _load_all(text):
    try:
        return list(yaml.load_all(text, Loader=BASE_LOADER))
    except yaml.YAMLError:
        return []


def _closing(text, start):
    """Index of the bracket that closes the one opening at ``start``, or the end of ``text``."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] in '([{':
            depth += 1
        elif text[index] in ')]}':
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def _merged_operands(expression):
    """(offset, text) of what each merge in a Jinja expression takes part in: ``combine(...)`` with
    everything before it (what it is laid over, too), the arguments of ``dict(...)``, and a list
    piped into ``combine``."""
    for match in re.finditer(r'\b(combine|dict)\s*\(', expression):
        start = 0 if match.group(1) == 'combine' else match.end() - 1
        yield match.start(), expression[start:_closing(expression, match.end() - 1) + 1]
    for match in re.finditer(r'\]\s*\|\s*combine\b', expression):
        opening, depth = match.start(), 0
        for index in range(match.start(), -1, -1):
            depth += {']': 1, '[': -1}.get(expression[index], 0)
            if depth == 0:
                opening = index
                break
        yield match.start(), expression[opening:match.start() + 1]


def jinja_argument_merges(root, files):
    """Jinja that merges the extra or the node layer, or a variable set from them, with other arguments:
    ``combine`` with it on either side, ``dict`` with it as an argument, or a list holding it piped into
    ``combine``, on any number of lines."""
    code = [(path, text) for path, text in files if path.endswith(('.yml', '.yaml', '.j2'))]
    # What could set a variable from the layer: Jinja set, and YAML variables with a templated string.
    settings = []
    for path, text in code:
        settings.extend(JINJA_SET.findall(text))
        if path.endswith(('.yml', '.yaml')) and '{' in text:
            settings.extend((key, value) for document in _load_all(text)
                            for key, value in _variables(document, _defines_variables(path))
                            if '{' in value and key not in JINJA_LAYERS)
    aliases = set()
    # Variables set from the extra layer, followed hop by hop.
    while True:
        layer = re.compile(r'\b(%s)\b' % '|'.join(list(JINJA_LAYERS) + sorted(aliases)))
        found = aliases | set(name for name, expression in settings if layer.search(expression))
        if found == aliases:
            break
        aliases = found
    layer = re.compile(r'\b(%s)\b' % '|'.join(list(JINJA_LAYERS) + sorted(aliases)))
    problems = []
    for path, text in code:
        for match in JINJA_EXPRESSION.finditer(text):
            for offset, operands in _merged_operands(match.group(0)):
                if layer.search(operands):
                    line = text.count('\n', 0, match.start() + offset) + 1
                    problems.append('%s:%d merges the server arguments itself: give each layer to the sglang_server'
                                    ' role, read them with the filters inferops.serving.server_port / tp_size or'
                                    ' sglang_server_deployment' % (os.path.relpath(path, root), line))
                    break
    return problems


def check_argument_merges(root, files):
    """A second merge of the server's arguments drifts from the first: read _server_arguments.layers."""
    return jinja_argument_merges(root, files) + python_argument_merges(root)
