# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks between roles, playbooks and plugins that ansible-lint does not make.

1. defaults/main.yml and meta/argument_specs.yml of every role list the same keys, and every
   option's ``default:`` is the value in defaults/main.yml (so ``ansible-doc -t role`` shows
   what runs). Options are the union over the role's entry points.
2. Every role variable is read somewhere (a role's tasks, templates, handlers, vars, another
   default, a playbook, an inventory or a scenario): a default nothing reads is dead API.
3. Nothing reads another role's private variables (``_<role>_*`` or ``__<role>_*``): a playbook
   or role reads what a role publishes (its documented variables and facts), never its registers.
   A role's own molecule scenario (molecule/<role>/) may look inside it.
4. No Python file under plugins/module_utils (subpackages included) is over 500 lines: a file
   that long does more than one job; split it by job, as plugins/module_utils/_topology/ is.
5. What counts as a secret is defined once, in plugins/module_utils/_secrets.py. Outside it, no
   Python file under plugins/ assigns a name containing SECRET, nor writes a tuple, list or set
   that holds one of its secret names (an option dest such as ``admin_api_key``, its flag spelling
   ``admin-api-key``, an environment variable such as ``HF_TOKEN``): such a copy drifts from the
   one list, and a secret it lacks is then shown or put on a command line.

Usage: python scripts/lint_roles.py [ROOT]           exit 1 and one line per problem when any
       python scripts/lint_roles.py --fix-defaults    copy missing defaults into argument_specs
"""

import ast
import os
import re
import runpy
import sys

import yaml

SCANNED_DIRS = ('roles', 'playbooks', 'molecule', 'inventories')
SCANNED_FILES = ('deploy.yml',)
TEXT_SUFFIXES = ('.yml', '.yaml', '.j2', '.py', '.md')
# Documentation and tests may name private variables; code may not.
NOT_CODE_SUFFIXES = ('.md', '.py')
MODULE_UTILS = os.path.join('plugins', 'module_utils')
MODULE_UTILS_MAX_LINES = 500
SECRETS_MODULE = os.path.join(MODULE_UTILS, '_secrets.py')
# The lists of the secrets module that hold exact names. Its words and markers (``secret``,
# ``TOKEN``) are matched inside other names and are too common to look for on their own.
SECRET_NAME_LISTS = ('SERVER_SECRET_DESTS', 'SERVER_SECRET_FLAGS', 'ROUTER_SECRET_DESTS', 'SECRET_ENV_NAMES')


def roles(root):
    folder = os.path.join(root, 'roles')
    return sorted(name for name in os.listdir(folder) if os.path.isdir(os.path.join(folder, name)))


def load_yaml(path):
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return yaml.safe_load(handle)


def spec_options(root, role):
    specs = load_yaml(os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml')) or {}
    options = {}
    for entry in (specs.get('argument_specs') or {}).values():
        for name, option in ((entry or {}).get('options') or {}).items():
            options.setdefault(name, option or {})
    return options


def check_defaults(root, role):
    problems = []
    defaults = load_yaml(os.path.join(root, 'roles', role, 'defaults', 'main.yml')) or {}
    options = spec_options(root, role)
    for name in sorted(set(defaults) - set(options)):
        problems.append('roles/%s: %s is in defaults/main.yml but not in meta/argument_specs.yml' % (role, name))
    for name in sorted(set(options) - set(defaults)):
        problems.append('roles/%s: %s is in meta/argument_specs.yml but not in defaults/main.yml' % (role, name))
    for name in sorted(set(options) & set(defaults)):
        if 'default' not in options[name]:
            problems.append('roles/%s: meta/argument_specs.yml gives %s no default (defaults/main.yml: %r)'
                            % (role, name, defaults[name]))
        elif options[name]['default'] != defaults[name]:
            problems.append('roles/%s: %s defaults to %r in meta/argument_specs.yml but %r in defaults/main.yml'
                            % (role, name, options[name]['default'], defaults[name]))
    return problems


def text_files(root):
    for top in SCANNED_DIRS:
        for folder, _dirs, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith(TEXT_SUFFIXES):
                    yield os.path.join(folder, name)
    for name in SCANNED_FILES:
        path = os.path.join(root, name)
        if os.path.exists(path):
            yield path


def owner_role(root, path):
    """The role whose private variables this file may read: its own, or the role a scenario tests."""
    parts = os.path.relpath(path, root).split(os.sep)
    return parts[1] if parts[0] in ('roles', 'molecule') and len(parts) > 2 else None


def check_private(root, role_names, files):
    problems = []
    # Longest names first: __sglang_server_x belongs to sglang_server, not to sglang.
    names = sorted(role_names, key=len, reverse=True)
    private = re.compile(r'\b_{1,2}(%s)_[A-Za-z0-9_]+' % '|'.join(re.escape(r) for r in names))
    for path, text in files:
        if path.endswith(NOT_CODE_SUFFIXES):
            continue
        reader = owner_role(root, path)
        for number, line in enumerate(text.splitlines(), 1):
            for match in private.finditer(line):
                if match.group(1) != reader:
                    problems.append('%s:%d reads %s, private to role %s: read what the role publishes instead'
                                    % (os.path.relpath(path, root), number, match.group(0), match.group(1)))
    return problems


def check_unread(root, role, files):
    problems = []
    defaults = load_yaml(os.path.join(root, 'roles', role, 'defaults', 'main.yml')) or {}
    defaults_path = os.path.join(root, 'roles', role, 'defaults', 'main.yml')
    for name in sorted(defaults):
        pattern = re.compile(r'\b%s\b' % re.escape(name))
        readers = [path for path, text in files
                   if not path.endswith('.md') and not path.endswith(os.path.join('meta', 'argument_specs.yml'))
                   and (path != defaults_path and pattern.search(text)
                        or path == defaults_path and len(pattern.findall(text)) > 1)]
        if not readers:
            problems.append('roles/%s: %s is a role variable that nothing reads' % (role, name))
    return problems


def python_files(root, top):
    for folder, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = sorted(name for name in dirs if name != '__pycache__')
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.join(folder, name)


def check_module_utils_size(root):
    problems = []
    for path in python_files(root, MODULE_UTILS):
        with open(path) as handle:
            count = len(handle.read().splitlines())
        if count > MODULE_UTILS_MAX_LINES:
            problems.append('%s: %d lines, more than %d: split it into modules of one job each'
                            % (os.path.relpath(path, root), count, MODULE_UTILS_MAX_LINES))
    return problems


def secret_names(root):
    """The exact secret names of the secrets module, in both spellings (admin_api_key, admin-api-key)."""
    found = runpy.run_path(os.path.join(root, SECRETS_MODULE))
    names = set()
    for list_name in SECRET_NAME_LISTS:
        for name in found[list_name]:
            names.update((name, name.replace('_', '-'), name.replace('-', '_')))
    return names


def assigned_names(node):
    """Names an assignment binds: ``A = ...``, ``A, B = ...``, ``self.A = ...``."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store):
                yield part.id
            elif isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store):
                yield part.attr


def check_secret_lists(root):
    if not os.path.exists(os.path.join(root, SECRETS_MODULE)):
        return []
    names = secret_names(root)
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
                for name in assigned_names(node):
                    if 'SECRET' in name:
                        problems.append('%s:%d defines %s: secret names are defined once, in %s; import them'
                                        ' from there' % (relative, node.lineno, name, SECRETS_MODULE))
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                listed = sorted(set(item.value for item in node.elts if isinstance(item, ast.Constant)
                                    and isinstance(item.value, str) and item.value in names))
                if listed:
                    problems.append('%s:%d lists the secret name(s) %s: import the list from %s instead'
                                    % (relative, node.lineno, ', '.join(listed), SECRETS_MODULE))
    return problems


# The server's arguments are merged in one place for readers without the installed SGLang
# (plugins/module_utils/_server_arguments.py) and in one with it (the validator's layers).
ARGUMENT_MERGERS = ('plugins/module_utils/_server_arguments.py', 'plugins/module_utils/_sglang_server_args.py')
# Jinja laying the extra arguments over the arguments, and Python updating a mapping with them.
JINJA_ARGUMENT_MERGE = re.compile(r'combine\([^)]*sglang_server_extra_args')
PYTHON_ARGUMENT_MERGE = re.compile(r'\.update\([^)]*extra_args')


def check_argument_merges(root, files):
    """A second merge of the server's arguments drifts from the first: read _server_arguments."""
    problems = []
    for path, text in files:
        for number, line in enumerate(text.splitlines(), 1):
            if JINJA_ARGUMENT_MERGE.search(line):
                problems.append('%s:%d merges sglang_server_extra_args itself: use the filters inferops.serving.'
                                'server_port / tp_size or sglang_server_deployment' % (os.path.relpath(path, root), number))
    for path in python_files(root, 'plugins'):
        relative = os.path.relpath(path, root)
        if relative in ARGUMENT_MERGERS:
            continue
        with open(path) as handle:
            for number, line in enumerate(handle.read().splitlines(), 1):
                if PYTHON_ARGUMENT_MERGE.search(line):
                    problems.append('%s:%d merges the extra arguments itself: use _server_arguments.'
                                    'effective_arguments' % (relative, number))
    return problems


def _yaml_value(value, indent):
    text = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, width=100)
    if text.endswith('...\n'):
        text = text[:-4]
    lines = text.rstrip('\n').split('\n')
    if isinstance(value, (dict, list)) and value:
        return '\n' + '\n'.join(' ' * indent + line for line in lines)
    return ' ' + lines[0]


def fix_defaults(root, role):
    """Write each option's default from defaults/main.yml into argument_specs, after its type."""
    path = os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml')
    defaults = load_yaml(os.path.join(root, 'roles', role, 'defaults', 'main.yml')) or {}
    options = spec_options(root, role)
    with open(path) as handle:
        lines = handle.read().split('\n')
    for name in options:
        if name not in defaults or 'default' in options[name]:
            continue
        # An option sits in a group of options (deeper) or right under an entry point's options.
        start = next(at for at, line in enumerate(lines) if re.match(r'^ +%s:$' % re.escape(name), line))
        field = ' ' * (len(lines[start]) - len(lines[start].lstrip()) + 2)
        at = start + 1
        while at < len(lines) and lines[at].startswith(field) and not lines[at].startswith(field + 'type:'):
            at += 1
        at = at + 1 if at < len(lines) and lines[at].startswith(field + 'type:') else start + 1
        lines.insert(at, field + 'default:' + _yaml_value(defaults[name], len(field) + 2))
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines))


def main(argv):
    if len(argv) > 1 and argv[1] == '--fix-defaults':
        root = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
        for role in roles(root):
            fix_defaults(root, role)
        return 0
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    names = roles(root)
    files = []
    for path in text_files(root):
        with open(path) as handle:
            files.append((path, handle.read()))
    problems = []
    for role in names:
        problems += check_defaults(root, role)
        problems += check_unread(root, role, files)
    problems += check_private(root, names, files)
    problems += check_module_utils_size(root)
    problems += check_secret_lists(root)
    problems += check_argument_merges(root, files)
    for problem in problems:
        print(problem)
    if problems:
        print('%d problem(s) between roles, playbooks and plugins' % len(problems))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
