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
6. A role with a tasks/steps/ folder (the serving role) shows its public face. Every file directly
   in its tasks/ is an entry point of its argument specs; the files of tasks/steps/ are internal
   steps, which only its own entry points and steps run (check 7 keeps everything else out of
   them, so no step needs a guard of its own). Entry points name a
   step steps/<file>.yml; a step imports another by its file name (a static import resolves from
   the importing step's folder) and includes one as steps/<file>.yml (a dynamic include resolves
   from tasks/, then from the playbook's folder, whose own converge.yml would be taken for the
   step). Every entry point but main lists exactly the options its tasks read (its file, the steps
   it reaches, the templates they render, the role's vars/main.yml); main lists every option.
7. No playbook, other role, scenario, test or benchmark (YAML under playbooks/, roles/, molecule/,
   tests/, bench/, deploy.yml; dict and YAML literals in their Python) imports such a role with a
   tasks_from that is not an entry point, nor imports or includes a file of its tasks/ itself.

Usage: python scripts/lint_roles.py [ROOT]           exit 1 and one line per problem when any
       python scripts/lint_roles.py --fix-defaults    copy missing defaults into argument_specs
"""

import ast
import collections
import os
import re
import sys

import yaml

from lint_single_source import SAFE_LOADER, check_argument_merges, check_secret_lists, python_files

SCANNED_DIRS = ('roles', 'playbooks', 'molecule', 'inventories')
SCANNED_FILES = ('deploy.yml',)
TEXT_SUFFIXES = ('.yml', '.yaml', '.j2', '.py', '.md')
# Documentation and tests may name private variables; code may not.
NOT_CODE_SUFFIXES = ('.md', '.py')
MODULE_UTILS = os.path.join('plugins', 'module_utils')
MODULE_UTILS_MAX_LINES = 500
WORD = re.compile(r'\w+')


def roles(root):
    folder = os.path.join(root, 'roles')
    return sorted(name for name in os.listdir(folder) if os.path.isdir(os.path.join(folder, name)))


def load_yaml(path):
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return yaml.load(handle, Loader=SAFE_LOADER)


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
    # Each file's words once: a variable name is one word, read where its word appears (in the
    # defaults file, beyond its own definition).
    words = [(path, collections.Counter(WORD.findall(text))) for path, text in files
             if not path.endswith('.md') and not path.endswith(os.path.join('meta', 'argument_specs.yml'))]
    for name in sorted(defaults):
        readers = [path for path, counts in words if counts[name] > (1 if path == defaults_path else 0)]
        if not readers:
            problems.append('roles/%s: %s is a role variable that nothing reads' % (role, name))
    return problems


def check_module_utils_size(root):
    problems = []
    for path in python_files(root, MODULE_UTILS):
        with open(path) as handle:
            count = len(handle.read().splitlines())
        if count > MODULE_UTILS_MAX_LINES:
            problems.append('%s: %d lines, more than %d: split it into modules of one job each'
                            % (os.path.relpath(path, root), count, MODULE_UTILS_MAX_LINES))
    return problems


# A role's internal steps live in tasks/<STEPS>/; its entry points beside them, in tasks/.
STEPS = 'steps'
INCLUDES = ('ansible.builtin.import_tasks', 'ansible.builtin.include_tasks', 'import_tasks', 'include_tasks')
STATIC_INCLUDES = ('ansible.builtin.import_tasks', 'import_tasks')
# Where playbooks, other roles, scenarios, tests and benchmarks could run a role's task files.
USE_DIRS = ('playbooks', 'roles', 'molecule', 'tests', 'bench')
USE_SKIPPED_DIRS = ('__pycache__', 'output', '.cache')
# This script's own test plants, as text, the uses it must find.
USE_PLANTED = (os.path.join('tests', 'unit', 'scripts', 'test_lint_roles.py'),)


class _TaglessLoader(SAFE_LOADER):
    """Reads the YAML of playbooks whatever their tags (!unsafe, !vault): only the structure counts."""


def _tag_value(loader, _suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


_TaglessLoader.add_multi_constructor('!', _tag_value)


def _yaml_documents(text):
    try:
        return list(yaml.load_all(text, Loader=_TaglessLoader))
    except yaml.YAMLError:
        return []


def _task_dicts(tasks):
    """Every task of a task list, those inside blocks (block, rescue, always) too."""
    for task in tasks if isinstance(tasks, list) else []:
        if isinstance(task, dict):
            yield task
            for key in ('block', 'rescue', 'always'):
                yield from _task_dicts(task.get(key))


def _mappings(value):
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _mappings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _mappings(inner)


def _includes(path):
    """(action, target) of every import_tasks and include_tasks of a task file, in order."""
    tasks = load_yaml(path)
    found = []
    for task in _task_dicts(tasks):
        for action in INCLUDES:
            if action in task:
                target = task[action]
                found.append((action, target.get('file') if isinstance(target, dict) else target))
    return found


def _without_comments(text):
    kept = []
    for line in text.splitlines():
        if not line.lstrip().startswith('#'):
            kept.append(re.sub(r'\s+#\s.*$', '', line))
    return '\n'.join(kept)


def entry_point_names(root, role):
    specs = load_yaml(os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml')) or {}
    return list(specs.get('argument_specs') or {})


def _entry_options(root, role):
    specs = load_yaml(os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml')) or {}
    return dict((name, set((entry or {}).get('options') or {}))
                for name, entry in (specs.get('argument_specs') or {}).items())


def _resolve(tasks_dir, including, target):
    """The file (relative to tasks/) an include names: from tasks/, else beside the including file."""
    if not isinstance(target, str) or '{{' in target:
        return None
    for candidate in (target, os.path.join(os.path.dirname(including), target)):
        candidate = os.path.normpath(candidate)
        if os.path.isfile(os.path.join(tasks_dir, candidate)):
            return candidate
    return None


def _chain(tasks_dir, first):
    """The task files an entry point runs: its own and those it imports and includes, transitively."""
    seen, todo = [], [first]
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.append(current)
        for _action, target in _includes(os.path.join(tasks_dir, current)):
            found = _resolve(tasks_dir, current, target)
            if found:
                todo.append(found)
    return seen


def _read_options(root, role, chain, options):
    """The role's options that the files of ``chain`` read, through its private vars and templates too."""
    role_dir = os.path.join(root, 'roles', role)
    texts = []
    for name in chain:
        with open(os.path.join(role_dir, 'tasks', name)) as handle:
            text = handle.read()
        texts.append(_without_comments(text))
        for template in re.findall(r'\bsrc:\s*["\']?([\w./-]+\.j2)\b', text):
            path = os.path.join(role_dir, 'templates', template)
            if os.path.isfile(path):
                with open(path) as handle:
                    texts.append(handle.read())
    private = load_yaml(os.path.join(role_dir, 'vars', 'main.yml')) or {}
    private = dict((name, yaml.safe_dump(value)) for name, value in private.items())
    word = re.compile(r'\b_{0,2}%s_[A-Za-z0-9_]+' % re.escape(role))
    named = set(word.findall('\n'.join(texts)))
    todo = [name for name in named if name in private]
    while todo:
        for name in word.findall(private[todo.pop()]):
            if name not in named:
                named.add(name)
                if name in private:
                    todo.append(name)
    return named & set(options)


def check_public_face(root, role):
    problems = []
    tasks_dir = os.path.join(root, 'roles', role, 'tasks')
    where = 'roles/%s/tasks' % role
    entries = entry_point_names(root, role)
    files = sorted(name for name in os.listdir(tasks_dir) if os.path.isfile(os.path.join(tasks_dir, name)))
    steps = sorted(name for name in os.listdir(os.path.join(tasks_dir, STEPS)) if name.endswith('.yml'))
    for name in files:
        if name[:-len('.yml')] not in entries:
            problems.append('%s/%s is not an entry point of meta/argument_specs.yml: document it there, or move it'
                            ' to %s/ if the entry points run it' % (where, name, STEPS))
    for entry in entries:
        if entry + '.yml' not in files:
            problems.append('roles/%s: entry point %s of meta/argument_specs.yml has no %s/%s.yml' % (role, entry, where, entry))
    for name in files + [os.path.join(STEPS, step) for step in steps]:
        in_steps = name.startswith(STEPS + os.sep)
        with open(os.path.join(tasks_dir, name)) as handle:
            lines = [number for number, line in enumerate(handle.read().splitlines(), 1) if '_tasks:' in line]
        for index, (action, target) in enumerate(_includes(os.path.join(tasks_dir, name))):
            static = action in STATIC_INCLUDES
            if not in_steps:
                good = (isinstance(target, str) and (target.startswith(STEPS + '/') and target[len(STEPS) + 1:] in steps
                                                     or target in files))
                rule = '%s/<file>.yml (a step) or <entry point>.yml' % STEPS
            elif static:
                good = target in steps
                rule = '<file>.yml, a step beside it (a static import resolves from the importing file\'s folder)'
            else:
                good = isinstance(target, str) and target.startswith(STEPS + '/') and target[len(STEPS) + 1:] in steps
                rule = ('%s/<file>.yml (a dynamic include resolves from tasks/, then from the playbook\'s folder,'
                        ' whose own file of that name would be taken for the step)' % STEPS)
            if not good:
                line = lines[index] if index < len(lines) else 0
                problems.append('%s/%s:%d: %s %s should name %s' % (where, name, line, action.split('.')[-1], target, rule))
    options = _entry_options(root, role)
    every = set().union(*options.values()) if options else set()
    if 'main' in options and options['main'] != every:
        problems.append('roles/%s: the options of entry point main lack %s: main lists every option'
                        % (role, ', '.join(sorted(every - options['main']))))
    for entry in entries:
        if entry + '.yml' not in files:
            continue
        if entry == 'main':
            continue
        chain = _chain(tasks_dir, entry + '.yml')
        read = _read_options(root, role, chain, every)
        for name in sorted(read - options[entry]):
            problems.append('roles/%s: entry point %s reads %s, which its options in meta/argument_specs.yml lack'
                            % (role, entry, name))
        for name in sorted(options[entry] - read):
            problems.append('roles/%s: entry point %s lists option %s, which none of its tasks reads' % (role, entry, name))
    return problems


def _use_files(root):
    for top in USE_DIRS:
        for folder, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(name for name in dirs if name not in USE_SKIPPED_DIRS)
            for name in sorted(names):
                if name.endswith(('.yml', '.yaml', '.py')):
                    yield os.path.join(folder, name)
    for name in SCANNED_FILES:
        if os.path.exists(os.path.join(root, name)):
            yield os.path.join(root, name)


def _python_literals(text, relative):
    """The dicts and the YAML texts a Python file writes out literally (playbooks built by a test)."""
    try:
        tree = ast.parse(text, relative)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            literal = dict((key.value, value.value) for key, value in zip(node.keys, node.values)
                           if isinstance(key, ast.Constant) and isinstance(value, ast.Constant))
            if 'tasks_from' in literal:
                yield literal
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and 'tasks_from' in node.value:
            for document in _yaml_documents(node.value):
                yield from _mappings(document)


def _line_of(text, needle):
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return 0


def check_entry_point_use(root, faced):
    problems = []
    if not faced:
        return problems
    namespace = 'inferops.serving'
    galaxy = load_yaml(os.path.join(root, 'galaxy.yml'))
    if galaxy:
        namespace = '%s.%s' % (galaxy['namespace'], galaxy['name'])
    names = dict((spelling, role) for role in faced for spelling in (role, '%s.%s' % (namespace, role)))
    entries = dict((role, entry_point_names(root, role)) for role in faced)
    task_files = re.compile(r'(?:^|/)(?:roles/)?(%s)/tasks/' % '|'.join(re.escape(role) for role in faced))
    for path in _use_files(root):
        relative = os.path.relpath(path, root)
        if relative in USE_PLANTED or any(relative.startswith(os.path.join('roles', role) + os.sep) for role in faced):
            continue
        with open(path) as handle:
            text = handle.read()
        if 'tasks_from' not in text and '/tasks/' not in text:
            continue
        if path.endswith('.py'):
            mappings = list(_python_literals(text, relative))
        else:
            mappings = [found for document in _yaml_documents(text) for found in _mappings(document)]
        for mapping in mappings:
            role = names.get(mapping.get('name', mapping.get('role')))
            tasks_from = mapping.get('tasks_from')
            if role and tasks_from is not None:
                entry = re.sub(r'\.ya?ml$', '', str(tasks_from))
                if entry not in entries[role]:
                    problems.append('%s:%d runs %s.%s with tasks_from: %s, which is not one of its entry points (%s):'
                                    ' name an entry point; tasks/%s/ holds its internal steps'
                                    % (relative, _line_of(text, str(tasks_from)), namespace, role, tasks_from,
                                       ', '.join(entries[role]), STEPS))
            for action in INCLUDES:
                target = mapping.get(action)
                if isinstance(target, str) and task_files.search(target):
                    problems.append('%s:%d runs %s itself: import the role %s.%s with tasks_from: <entry point>'
                                    % (relative, _line_of(text, target), target, namespace,
                                       task_files.search(target).group(1)))
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
    faced = [role for role in names if os.path.isdir(os.path.join(root, 'roles', role, 'tasks', STEPS))]
    for role in faced:
        problems += check_public_face(root, role)
    problems += check_entry_point_use(root, faced)
    for problem in problems:
        print(problem)
    if problems:
        print('%d problem(s) between roles, playbooks and plugins' % len(problems))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
