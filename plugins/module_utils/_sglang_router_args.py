# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Check SGLang router arguments against the installed ``router_args.py`` (sglang-router or smg).

The router's ``RouterArgs.add_cli_args`` builds most option names as f-strings
(``f"--{prefix}policy"``, where ``prefix`` is ``"router-"`` only when the router's flags are
mixed into SGLang's server parser). ``launch_router`` uses no prefix, so every such f-string
is written back as the plain string it produces there; the rest of the reading is the
argparse reader of ``_server_arguments.argparse_reader``, the checking and rendering the
server's (``_server_arguments.option_checks`` and ``command``).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import ast

from ansible_collections.inferops.serving.plugins.module_utils._secrets import ROUTER_SECRET_DESTS, flag_looks_secret
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import (
    SglangSourceError,
    parse_argparse_source,
    read_field_defaults,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.command import render_argv
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.endpoint import effective_value
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import merge_layers
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.option_checks import (
    SglangServerArgsError,
    resolve_option,
    resolve_settings,
)
from ansible_collections.inferops.serving.plugins.module_utils._systemd_quote import systemd_command_line

# Workers are managed through the router's /workers API by the collection: a worker given on the
# command line would receive the clients' key (--api-key), not the workers' own, and would not
# be drained or recorded for a restart. smg adds more ways for workers to come and go: encode
# workers (EPD), a discovery file or provider, a mesh of routers that share their workers, and
# the RL control plane.
MANAGED_DESTS = ('worker_urls', 'service_discovery', 'pd_disaggregation', 'prefill', 'decode', 'mini_lb',
                 'epd_disaggregation', 'encode', 'discovery_provider', 'discovery_file', 'enable_mesh',
                 'mesh_peer_urls', 'enable_rl')


class SglangRouterArgsError(SglangServerArgsError):
    """The router_args.py source or the given router arguments cannot be used."""


def _joined_string(node, prefix):
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(value.value)
        elif (isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name)
              and value.value.id == 'prefix' and value.format_spec is None and value.conversion == -1):
            parts.append(prefix)
        else:
            return None
    return ''.join(parts)


def plain_option_source(source, prefix=''):
    """The source with each ``f"--{prefix}name"`` literal replaced by the string it yields.

    Positions come from the parsed tree, so only the option-name f-strings change; the result
    parses to the same program with ``prefix`` bound to the given value.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SglangRouterArgsError('cannot parse router_args.py: %s' % exc)
    lines = source.splitlines(True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode('utf-8')))
    data = source.encode('utf-8')
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and getattr(node, 'end_lineno', None) is not None:
            text = _joined_string(node, prefix)
            if text is None or not text.startswith('-'):
                continue
            start = offsets[node.lineno - 1] + node.col_offset
            end = offsets[node.end_lineno - 1] + node.end_col_offset
            edits.append((start, end, repr(text).encode('utf-8')))
    for start, end, replacement in sorted(edits, reverse=True):
        data = data[:start] + replacement + data[end:]
    return data.decode('utf-8')


def parse_router_args_source(source):
    """Options of ``RouterArgs.add_cli_args`` as ``launch_router`` defines them (see parse_argparse_source)."""
    try:
        return parse_argparse_source(plain_option_source(source), name='router_args.py')
    except SglangSourceError as exc:
        raise SglangRouterArgsError(str(exc))


def build_router_command(spec, args, defaults=None):
    """Validate structured router arguments and render them.

    Returns ``argv``, ``args`` (flag -> value as written), ``errors``, ``notes`` and where the
    router listens (``host``, ``port``, ``prometheus_host``, ``prometheus_port``, ``policy``).
    """
    errors = []
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise SglangRouterArgsError('sglang_router_args must be a mapping of flag -> value, got %s'
                                    % type(args).__name__)
    allowed = {}
    for key, value in args.items():
        try:
            canonical = resolve_option(spec, key)[0]
        except SglangServerArgsError as exc:
            errors.append('sglang_router_args: %s' % str(exc).replace('of this SGLang', 'of this router'))
            continue
        dest = spec['options'][canonical]['dest']
        if dest in ROUTER_SECRET_DESTS and value not in (None, False):
            errors.append('sglang_router_args: %s must not be set here (it would end up in the process command line); '
                          'the clients\' key is sglang_router_api_key, the key of smg\'s /workers API '
                          'sglang_router_admin_api_key (vault them); the workers\' key is their '
                          'sglang_server_api_key, given to the router when each worker is registered' % canonical)
            continue
        if dest in MANAGED_DESTS and value not in (None, False):
            errors.append('sglang_router_args: %s is not supported: workers are registered through the router\'s '
                          '/workers API by the serving role (each with the workers\' API key)' % canonical)
            continue
        allowed[key] = value
    mapping, spellings, _layer, layer_errors, notes = resolve_settings(spec, merge_layers(allowed), ('sglang_router_args',))
    errors.extend(layer_errors)
    defaults = defaults or {}

    def pick(flag, dest, fallback=None):
        value = effective_value(spec, mapping, flag)
        if value is None:
            value = defaults.get(dest, fallback)
        return value

    argv = [] if errors else render_argv(mapping, spec, spellings)
    port = pick('--port', 'port', 30000)
    prometheus_port = pick('--prometheus-port', 'prometheus_port')
    if errors:
        # A value may be what was wrong (a port that is no number): nothing more is derived.
        port = prometheus_port = None
    return {
        'argv': argv,
        'exec_args': systemd_command_line(argv) if not errors else '',
        'args': dict((spellings[k][2:], v) for k, v in mapping.items()),
        'errors': errors,
        'notes': notes,
        'host': pick('--host', 'host', '0.0.0.0'),
        'port': int(port) if port is not None else None,
        'prometheus_host': pick('--prometheus-host', 'prometheus_host'),
        'prometheus_port': int(prometheus_port) if prometheus_port is not None else None,
        'policy': pick('--policy', 'policy'),
    }


def unchecked_router_command(args):
    """The command line ``args`` would give before the router is installed (check mode of a first
    install, or of a switch of package), so that a diff shows it; nothing is checked but secrets,
    which are refused by name as the check refuses them, since the diff would show them."""
    if not isinstance(args, dict):
        raise SglangRouterArgsError('sglang_router_args must be a mapping of flag -> value, got %s'
                                    % type(args).__name__)
    errors = []
    for key in sorted(args, key=str):
        dest = str(key).lstrip('-').replace('-', '_')
        if (dest in ROUTER_SECRET_DESTS or flag_looks_secret(key)) and args[key] not in (None, False):
            errors.append('sglang_router_args: --%s must not be set here (it would end up in the process command'
                          ' line); the clients\' key is sglang_router_api_key, the key of smg\'s /workers API'
                          ' sglang_router_admin_api_key (vault them)' % dest.replace('_', '-'))
    argv = [] if errors else render_argv(args)
    return {'argv': argv, 'exec_args': systemd_command_line(argv), 'errors': errors}


def argparse_defaults(spec_source):
    """Defaults that the parser itself sets (``default=29000`` for --prometheus-port) over the dataclass's."""
    try:
        defaults = read_field_defaults(spec_source, 'RouterArgs', name='router_args.py')
    except SglangSourceError as exc:
        raise SglangRouterArgsError(str(exc))
    try:
        tree = ast.parse(plain_option_source(spec_source))
    except SyntaxError:
        return defaults
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'add_argument'):
            continue
        strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        longs = [s for s in strings if s.startswith('--')]
        for keyword in node.keywords:
            if keyword.arg == 'default' and longs:
                try:
                    defaults[longs[0][2:].replace('-', '_')] = ast.literal_eval(keyword.value)
                except (ValueError, TypeError, SyntaxError):
                    pass
    return defaults
