# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Find out how an installed SGLang declares its server options and read them.

Up to 0.5.9 ``sglang/srt/server_args.py`` declares every option with ``parser.add_argument``;
from 0.5.23 on the options are fields under ``sglang/srt/arg_groups/fields/``. The layout is
told apart by that folder, never by version number, so a release in between or after reads the
way its files are laid out. When neither layout yields the server's options the reading fails
with "cannot read the options of SGLang <version>" instead of refusing every flag as unknown.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import glob
import os

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.arg_groups_reader import (
    FIELDS_PACKAGE,
    SERVER_ARGS_MODULE,
    parse_arg_groups,
    read_arg_group_defaults,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import (
    SglangSourceError,
    parse_argparse_source,
    read_field_defaults,
)

ARGPARSE_LAYOUT = 'argparse'
ARG_GROUPS_LAYOUT = 'arg_groups'
# Every SGLang server has it; a reading without it found the wrong declarations.
_SENTINEL_OPTION = '--model-path'


class SourceTree:
    """Python sources under a site-packages folder, read by dotted module name.

    ``suffix`` is appended to every file name (the unit tests keep SGLang's files as ``.py.txt``);
    ``overrides`` maps a module name to a file read instead of the one in the tree.
    """

    def __init__(self, root, suffix='', overrides=None):
        self.root = root
        self.suffix = suffix
        self.overrides = dict(overrides or {})

    def path(self, module_name):
        if module_name in self.overrides:
            return self.overrides[module_name]
        base = os.path.join(self.root, *module_name.split('.'))
        for path in (base + '.py' + self.suffix, os.path.join(base, '__init__.py' + self.suffix)):
            if os.path.isfile(path):
                return path
        return base + '.py' + self.suffix

    def package_path(self, package):
        return os.path.join(self.root, *package.split('.'))

    def source(self, module_name):
        path = self.path(module_name)
        if not os.path.isfile(path):
            return None
        with open(path, 'r') as handle:
            return handle.read()

    def package_modules(self, package):
        folder = self.package_path(package)
        if not os.path.isdir(folder):
            return None
        ending = '.py' + self.suffix
        names = sorted(n[:-len(ending)] for n in os.listdir(folder) if n.endswith(ending))
        return ['%s.%s' % (package, n) for n in names if n != '__init__']


def sglang_version(site_packages):
    """Version of the SGLang distribution, from its dist-info folder; None when there is none."""
    found = sorted(glob.glob(os.path.join(site_packages, 'sglang-*.dist-info')))
    if not found:
        return None
    return os.path.basename(found[-1])[len('sglang-'):-len('.dist-info')]


def options_layout(sources):
    """``arg_groups`` when the declarative fields folder is there, else ``argparse``; None when neither is."""
    if os.path.isdir(sources.package_path(FIELDS_PACKAGE)):
        return ARG_GROUPS_LAYOUT
    if os.path.isfile(sources.path(SERVER_ARGS_MODULE)):
        return ARGPARSE_LAYOUT
    return None


def _unreadable(version, where, reason):
    return SglangSourceError('cannot read the options of SGLang %s from %s: %s'
                             % (version or '(unknown version)', where, reason))


def read_server_options(sources, version=None):
    """The server's option spec and field defaults, read the way this SGLang declares them.

    Returns ``layout``, ``source`` (the file or folder the options were read from), ``spec``
    (see parse_argparse_source) and ``defaults`` (field name -> literal default).
    """
    layout = options_layout(sources)
    fields_folder = sources.package_path(FIELDS_PACKAGE)
    server_args = sources.path(SERVER_ARGS_MODULE)
    if layout is None:
        raise _unreadable(version, sources.root, 'neither %s/ nor %s is there' % (
            os.path.relpath(fields_folder, sources.root), os.path.relpath(server_args, sources.root)))
    where = fields_folder if layout == ARG_GROUPS_LAYOUT else server_args
    try:
        if layout == ARG_GROUPS_LAYOUT:
            spec = parse_arg_groups(sources)
            defaults = read_arg_group_defaults(sources)
        else:
            source = sources.source(SERVER_ARGS_MODULE)
            spec = parse_argparse_source(source, sources.source, name=server_args)
            defaults = read_field_defaults(source, name=server_args)
    except (SglangSourceError, IOError, OSError, UnicodeDecodeError) as exc:
        raise _unreadable(version, where, str(exc))
    if _SENTINEL_OPTION not in spec['option_strings']:
        raise _unreadable(version, where, '%d options were found but not %s, so this SGLang declares its '
                          'options in a way this collection does not read' % (len(spec['options']), _SENTINEL_OPTION))
    return {'layout': layout, 'source': where, 'spec': spec, 'defaults': defaults}


def find_site_packages(venv_path):
    """The site-packages folder of the venv that holds the sglang package, or None."""
    candidates = sorted(glob.glob(os.path.join(venv_path, 'lib', 'python3*', 'site-packages', 'sglang')))
    candidates = [c for c in candidates if os.path.isdir(c)]
    return os.path.dirname(candidates[-1]) if candidates else None


def installed_option_strings(venv_path):
    """Every option string (``--tp-size``, ``--tp``) the SGLang in a venv understands.

    Raises SglangSourceError when SGLang is not there or its options cannot be read.
    """
    site_packages = find_site_packages(venv_path)
    if site_packages is None:
        raise SglangSourceError('SGLang is not installed in %s' % venv_path)
    return sorted(read_server_options(SourceTree(site_packages), sglang_version(site_packages))['spec']['option_strings'])
