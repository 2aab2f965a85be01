# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read the server options of SGLang's declarative ``sglang/srt/arg_groups`` layout (0.5.23 and later).

There the options are fields of msgspec Structs in ``arg_groups/fields/*.py``, annotated as
``A[type, "help"]`` or ``A[type, Arg(help=..., choices=..., aliases=..., cli_name=...,
type_parser=..., nargs=..., action=..., no_cli=...)]``. ``ServerArgs`` gathers the classes listed
in ``_INPUT_NAMESPACES`` of ``server_args.py``, and ``arg_utils.add_cli_args_from_dataclass``
turns each field into one ``add_argument`` call; ``ServerArgs.add_cli_args`` then registers a
few options by hand (choices computed at start-up, deprecated spellings, ``--config``).

This module repeats ``add_cli_args_from_dataclass``'s rules on the source, so nothing is imported:
``no_cli`` fields are skipped, a field without ``Arg`` or help string is skipped, ``Literal[...]``
gives the choices, ``List[X]`` takes one or more values (``nargs="+"`` unless ``Arg`` says
otherwise) unless a ``type_parser`` reads the whole string, ``bool`` is a bare flag, ``Optional``
is looked through, and a field without a default is required. The hand-made registrations are
read with the argparse reader.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import ast

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import (
    SglangSourceError,
    SourceModule,
    action_name,
    add_argument_records,
    add_record,
    deprecation,
    empty_spec,
    last_name,
    literal,
    option_record,
    subscript_items,
    type_name,
)

SERVER_ARGS_MODULE = 'sglang.srt.server_args'
FIELDS_PACKAGE = 'sglang.srt.arg_groups.fields'
_NAMESPACES_LIST = '_INPUT_NAMESPACES'
_NAMESPACE_MARKER = '_NS_PATH'
_SIMPLE_TYPES = ('str', 'int', 'float')
# Keywords of Arg() that decide whether and how a field becomes a flag: a value that cannot be
# read makes the whole reading fail rather than produce a wrong option.
_SHAPE_KEYWORDS = ('no_cli', 'cli_name', 'aliases', 'nargs', 'required')


def _annotated_parts(annotation):
    """``(inner type, Arg call or help string)`` of ``A[T, ...]``; None when not annotated for the CLI."""
    if not (isinstance(annotation, ast.Subscript) and last_name(annotation.value) in ('A', 'Annotated')):
        return None
    parts = subscript_items(annotation)
    if len(parts) < 2:
        return None
    # As arg_utils._unwrap_annotated: the first Arg or string wins, other markers are skipped.
    for meta in parts[1:]:
        if isinstance(meta, ast.Call) and last_name(meta.func) == 'Arg':
            return parts[0], meta
        if isinstance(meta, (ast.Constant, ast.JoinedStr, ast.BinOp)) and not (
                isinstance(meta, ast.Constant) and not isinstance(meta.value, str)):
            return parts[0], meta
    return None


def _union_members(module, node, depth=0):
    """The members of ``Optional[X]``, ``Union[X, Y]`` and ``X | Y``, flattened as typing does."""
    if depth > 20:
        return [node]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode='eval').body
        except SyntaxError:
            return [node]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_members(module, node.left, depth + 1) + _union_members(module, node.right, depth + 1)
    if isinstance(node, ast.Subscript):
        name = last_name(node.value)
        if name == 'Optional':
            return _union_members(module, subscript_items(node)[0], depth + 1) + [ast.Constant(value=None)]
        if name == 'Union':
            members = []
            for part in subscript_items(node):
                members.extend(_union_members(module, part, depth + 1))
            return members
    if isinstance(node, ast.Name) and node.id in module.assignments:
        # A type alias declared in the same file (``Backend = Literal[...]``).
        return _union_members(module, module.assignments[node.id], depth + 1)
    return [node]


def _field_shape(module, annotation):
    """``(kind, detail)`` of a field type as add_cli_args_from_dataclass sees it after Optional.

    Kinds: ``literal`` (detail: the node), ``list`` (detail: element type node), ``bool``,
    ``scalar`` (detail: the type name, or None for anything that is not str/int/float).
    """
    members = _union_members(module, annotation)
    non_none = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
    inner = non_none[0] if len(non_none) == 1 else None
    if inner is None:
        return 'scalar', None
    if isinstance(inner, ast.Subscript) and last_name(inner.value) == 'Literal':
        return 'literal', inner
    if isinstance(inner, ast.Subscript) and last_name(inner.value) in ('List', 'list'):
        return 'list', subscript_items(inner)[0]
    if last_name(inner) in ('List', 'list'):
        return 'list', None
    if last_name(inner) == 'bool':
        return 'bool', None
    name = last_name(inner)
    return 'scalar', name if name in _SIMPLE_TYPES else None


def _inferred_type(node):
    """arg_utils._infer_type_func: str, int and float pass through, anything else is read as str."""
    name = last_name(node) if node is not None else None
    return name if name in _SIMPLE_TYPES else 'str'


def _keyword_values(module, meta, field_name):
    if not isinstance(meta, ast.Call):
        return {'help': meta}, {}
    nodes = dict((k.arg, k.value) for k in meta.keywords if k.arg)
    values = {}
    for keyword in _SHAPE_KEYWORDS:
        if keyword in nodes:
            try:
                values[keyword] = module.evaluate(nodes[keyword])
            except SglangSourceError:
                raise SglangSourceError('the %s= of field %s in %s cannot be read without running it'
                                        % (keyword, field_name, module.name))
    return nodes, values


def _action_options(module, nodes, strings, field_name, retired):
    """A field with its own argparse action: arg_utils passes only ``action_kwargs`` on, not the type or choices."""
    action = action_name(nodes['action'])
    option_type, nargs, choices, unresolved = None, None, None, None
    extra = nodes.get('action_kwargs')
    extra = dict((k.value, v) for k, v in zip(extra.keys, extra.values)
                 if isinstance(k, ast.Constant)) if isinstance(extra, ast.Dict) else {}
    if 'nargs' in extra:
        nargs = literal(extra['nargs'])[1]
    if 'type' in extra:
        option_type = type_name(extra['type'])
    if 'choices' in extra:
        choices, unresolved = module.evaluate_choices(extra['choices'])
    takes_value = True
    if 'nargs' not in extra:
        details = module.action_class(action)
        takes_value = not (details and details['takes_no_value'])
    return option_record(strings, field_name, action, nargs, option_type, choices, unresolved, False,
                         retired, takes_value)


def field_record(module, field_name, annotation, has_default):
    """The option record of one field, or None when the field is not on the command line."""
    parts = _annotated_parts(annotation)
    if parts is None:
        return None
    inner, meta = parts
    nodes, values = _keyword_values(module, meta, field_name)
    if values.get('no_cli') is True:
        return None
    cli_name = values.get('cli_name') or '--' + field_name.replace('_', '-')
    strings = [cli_name] + list(values.get('aliases') or [])
    retired = deprecation(action_name(nodes.get('action')) if 'action' in nodes else 'store', module,
                          nodes.get('help'))
    if 'action' in nodes:
        return _action_options(module, nodes, strings, field_name, retired)

    choices, unresolved = None, None
    if 'choices' in nodes:
        choices, unresolved = module.evaluate_choices(nodes['choices'])
        # arg_utils tests Arg.choices for truth: an empty list restricts nothing.
        choices = choices or None
    type_parser = type_name(nodes['type_parser']) if 'type_parser' in nodes else None
    kind, detail = _field_shape(module, inner)
    if kind == 'literal':
        values_node = ast.List(elts=subscript_items(detail), ctx=ast.Load())
        literal_values, literal_unresolved = module.evaluate_choices(values_node)
        if not choices and not unresolved:
            choices, unresolved = literal_values, literal_unresolved
        # The argparse type follows the first Literal value (a None gives str).
        first_type = type(literal_values[0]).__name__ if literal_values else 'str'
        option_type = type_parser or (first_type if first_type in _SIMPLE_TYPES else 'str')
        return option_record(strings, field_name, 'store', None, option_type, choices, unresolved, False, retired)
    if kind == 'list' and type_parser is None:
        nargs = values.get('nargs') or '+'
        return option_record(strings, field_name, 'store', nargs, _inferred_type(detail), choices, unresolved,
                             False, retired)
    if kind == 'bool':
        return option_record(strings, field_name, 'store_true', None, None, None, None, False, retired)
    required = values.get('required') is True or (values.get('required') is None and not has_default)
    return option_record(strings, field_name, 'store', values.get('nargs'), type_parser or detail or 'str',
                         choices, unresolved, required, retired)


def _class_fields(module, class_node, depth=0):
    """``(module, name, annotation, value)`` of a Struct's fields, those of its bases first."""
    fields = []
    if depth < 10:
        for base in class_node.bases:
            # msgspec.Struct itself is an attribute and not read; a base class of fields is a name.
            base_module, base_node = module.class_definition(base.id) if isinstance(base, ast.Name) else (None, None)
            if base_node is not None:
                fields.extend(_class_fields(base_module, base_node, depth + 1))
    for item in class_node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            fields.append((module, item.target.id, item.annotation, item.value))
    return fields


def _declares_namespace(class_node):
    return any(isinstance(item, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == _NAMESPACE_MARKER for t in item.targets) for item in class_node.body)


def namespace_classes(server, sources):
    """``(module, ClassDef)`` of every class whose fields ServerArgs collects.

    ``_INPUT_NAMESPACES`` in server_args.py names them; without it, every class of the fields
    package that carries ``_NS_PATH`` (which is how ``fields/__init__.py`` describes them).
    """
    listed = server.assignments.get(_NAMESPACES_LIST)
    if isinstance(listed, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Name) for e in listed.elts):
        classes = []
        for element in listed.elts:
            module, node = server.class_definition(element.id)
            if node is None:
                raise SglangSourceError('%s lists %s, whose class cannot be read' % (server.name, element.id))
            classes.append((module, node))
        return classes
    classes = []
    for module_name in sources.package_modules(FIELDS_PACKAGE) or []:
        module = server.module(module_name)
        if module is None:
            continue
        for node in module.tree.body:
            if isinstance(node, ast.ClassDef) and _declares_namespace(node):
                classes.append((module, node))
    return classes


def _server_module(sources):
    source = sources.source(SERVER_ARGS_MODULE)
    if source is None:
        raise SglangSourceError('sglang/srt/server_args.py, which builds the parser, is missing')
    return SourceModule(source, SERVER_ARGS_MODULE, sources.source)


def parse_arg_groups(sources):
    """Options of the server command line of a declarative-layout SGLang (see parse_argparse_source).

    ``sources`` gives ``source(module_name)`` (text or None) and ``package_modules(package)``
    (the dotted names of the modules in a package, or None).
    """
    server = _server_module(sources)
    spec = empty_spec()
    for module, class_node in namespace_classes(server, sources):
        for field_module, name, annotation, value in _class_fields(module, class_node):
            record = field_record(field_module, name, annotation, value is not None)
            if record is not None:
                add_record(spec, record)
    if not spec['options']:
        raise SglangSourceError('no field of the arg_groups declarations is a command line option')
    for record in add_argument_records(server):
        add_record(spec, record)
    return spec


def read_arg_group_defaults(sources):
    """Literal defaults of the fields ServerArgs collects (field name -> value)."""
    server = _server_module(sources)
    defaults = {}
    for module, class_node in namespace_classes(server, sources):
        for _module, name, _annotation, value in _class_fields(module, class_node):
            ok, default = literal(value) if value is not None else (False, None)
            if ok:
                defaults[name] = default
    return defaults
