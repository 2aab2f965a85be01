# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang release sets: which packages, versions, CUDA toolkit, driver branch and Python fit together.

The sets are data (roles/sglang/vars/release_sets.yml); these pure functions take them as loaded,
resolve the versions the sglang role pins (a set, with single-version variables laid over it),
and say, before anything changes, whether a node's driver branch and python3 can run a set.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

REQUIRED_KEYS = ('description', 'cuda', 'driver_branch_min', 'python', 'packages')
# Every set names the SGLang distribution, FlashInfer, torch and one kernel package; the kernel
# was published as sgl-kernel up to 0.3.x and as sglang-kernel from 0.4 on.
REQUIRED_PACKAGES = ('sglang', 'flashinfer-python', 'torch')
KERNEL_PACKAGES = ('sgl-kernel', 'sglang-kernel')
# Single-version variables of the sglang role, each laid over one package of the set when not empty.
# The kernel variable pins whichever kernel package the set names.
OVERRIDES = (
    ('sglang_version', 'sglang'),
    ('sglang_flashinfer_version', 'flashinfer-python'),
    ('sglang_flashinfer_cubin_version', 'flashinfer-cubin'),
    ('sglang_sgl_kernel_version', KERNEL_PACKAGES),
    ('sglang_torch_version', 'torch'),
)
NOTHING_CHANGED = 'Nothing was changed on this host.'
# The endpoint that means ready where a set does not name one: every SGLang release has /health.
DEFAULT_READY_PATH = '/health'
# How a server is started where a set does not say: the module every SGLang release has.
DEFAULT_LAUNCH = 'python -m sglang.launch_server'
# The console scripts a set's launch may name, as the wheel's entry_points.txt declares them:
# script -> its function, given as the launcher takes it (module:function).
CONSOLE_SCRIPTS = {'sglang': 'sglang.cli.main:main'}
LAUNCH_MODULE = re.compile(r'^python3? -m ([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$')
LAUNCH_SCRIPT = re.compile(r'^([a-z_]+) ([a-z][a-z0-9-]*)$')
METRIC_NAME = re.compile(r'^sglang:[a-z][a-z0-9_]*$')


class ReleaseSetError(ValueError):
    """A release set that is not shipped, or data that is not a complete set."""


def _version_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r'[.]', str(name))]


def _sets(sets):
    if not isinstance(sets, dict):
        raise ReleaseSetError('the release sets must map set names to sets, got %s' % type(sets).__name__)
    return dict((str(name), release) for name, release in sets.items())


def set_names(sets):
    """The names of ``sets``, oldest SGLang line first."""
    return sorted(sets, key=_version_key)


def set_name_fits(name, sglang_version):
    """Whether ``name`` names a set of SGLang ``sglang_version``: the version itself ("0.5.23") or
    the version and a label ("0.5.23-cu128"), so that one SGLang release can have sets for two CUDA
    stacks; the name is also part of the set's venv folder name."""
    version = str(sglang_version or '')
    return bool(version) and (name == version or bool(re.match(r'^%s-[0-9a-z][0-9a-z.]*$' % re.escape(version), name)))


def release_problems(name, release):
    """What a set lacks or gets wrong; empty for a complete set."""
    if not isinstance(release, dict):
        return ['release set %s must be a mapping' % name]
    problems = ['release set %s has no %s' % (name, key) for key in REQUIRED_KEYS if key not in release]
    packages = release.get('packages')
    if not isinstance(packages, dict):
        return problems + ['release set %s: packages must map PyPI names to exact versions' % name]
    problems += ['release set %s pins no %s' % (name, package) for package in REQUIRED_PACKAGES
                 if package not in packages]
    kernels = [package for package in KERNEL_PACKAGES if package in packages]
    if len(kernels) != 1:
        problems.append('release set %s must pin exactly one of %s, pins %s'
                        % (name, ', '.join(KERNEL_PACKAGES), ', '.join(kernels) or 'none'))
    problems += ['release set %s: %s is %r, not a string with an exact version' % (name, package, version)
                 for package, version in packages.items()
                 if not isinstance(version, str) or not re.match(r'^\d+(\.\d+)+', version)]
    if not set_name_fits(name, packages.get('sglang')):
        problems.append('release set %s pins sglang %s; a set is named after its SGLang release, optionally with'
                        ' a label (%s or %s-<label>, the label of letters, digits and dots)'
                        % (name, packages.get('sglang'), packages.get('sglang'), packages.get('sglang')))
    if not re.match(r'^\d+\.\d+$', str(release.get('cuda', ''))):
        problems.append('release set %s: cuda must be a CUDA release such as "12.8"' % name)
    if not re.match(r'^\d{3}$', str(release.get('driver_branch_min', ''))):
        problems.append('release set %s: driver_branch_min must be a driver branch such as "580"' % name)
    ready_path = release.get('ready_path', DEFAULT_READY_PATH)
    if not isinstance(ready_path, str) or not re.match(r'^/[A-Za-z0-9_/-]*$', ready_path):
        problems.append('release set %s: ready_path must be a path of the server such as "/ready", got %r'
                        % (name, ready_path))
    try:
        launch_entry(release.get('launch', DEFAULT_LAUNCH))
    except ReleaseSetError as exc:
        problems.append('release set %s: %s' % (name, exc))
    metrics = release.get('metrics', [])
    if not isinstance(metrics, list) or not all(isinstance(metric, str) and METRIC_NAME.match(metric)
                                                for metric in metrics):
        problems.append('release set %s: metrics must list the release\'s metric families such as'
                        ' "sglang:num_running_reqs", got %r' % (name, metrics))
    try:
        _specifier(release.get('python'))
    except ReleaseSetError as exc:
        problems.append('release set %s: %s' % (name, exc))
    return problems


def release_set(name, sets):
    """The set called ``name`` with its name added; ReleaseSetError naming the known sets otherwise."""
    sets = _sets(sets)
    name = '' if name is None else str(name)
    if name not in sets:
        raise ReleaseSetError('sglang_release_set is %r, which is neither a release set of this collection nor one'
                              ' of sglang_release_sets; known sets: %s. Set sglang_release_set to one of them, or'
                              ' add the set to sglang_release_sets. %s'
                              % (name, ', '.join(set_names(sets)), NOTHING_CHANGED))
    problems = release_problems(name, sets[name])
    if problems:
        raise ReleaseSetError('; '.join(problems))
    release = dict(sets[name])
    release['name'] = name
    release['packages'] = dict((str(package), str(version)) for package, version in release['packages'].items())
    release['kernel_package'] = [package for package in KERNEL_PACKAGES if package in release['packages']][0]
    release['ready_path'] = release.get('ready_path', DEFAULT_READY_PATH)
    release['launch'] = release.get('launch', DEFAULT_LAUNCH)
    release['metrics'] = list(release.get('metrics', []))
    return release


def launch_entry(launch, package='sglang'):
    """What the launcher runs for a set's ``launch``: ``{'target': ..., 'args': [...]}``.

    ``python -m sglang.launch_server`` -> target ``sglang.launch_server`` (run as ``python -m`` would),
    ``sglang serve`` -> target ``sglang.cli.main:main`` (the console script's function) with the
    subcommand ``serve`` before the server's own arguments. ``package`` stands in for the ``sglang``
    package in the target (the lab names its simulator, which has the same modules).
    """
    text = ' '.join(str(launch if launch is not None else '').split())
    module = LAUNCH_MODULE.match(text)
    script = LAUNCH_SCRIPT.match(text)
    if module:
        target, args = module.group(1), []
    elif script and script.group(1) in CONSOLE_SCRIPTS:
        target, args = CONSOLE_SCRIPTS[script.group(1)], [script.group(2)]
    else:
        raise ReleaseSetError('launch must be "python -m <module>" or "<console script> <subcommand>" of %s'
                              ' (such as "sglang serve"), got %r' % (', '.join(sorted(CONSOLE_SCRIPTS)), launch))
    package = str(package or 'sglang')
    if not re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', package):
        raise ReleaseSetError('the package that stands in for sglang must be a top-level Python package name,'
                              ' got %r' % (package,))
    if target == 'sglang' or target.startswith('sglang.'):
        target = package + target[len('sglang'):]
    return {'target': target, 'args': args}


def pinned_versions(release, overrides=None):
    """Package -> version: the set's packages, each single-version variable that is not empty laid over its package.

    ``overrides``: variable name (``sglang_version``) -> value; empty or missing keeps the set's version.
    """
    versions = dict(release['packages'])
    for variable, package in OVERRIDES:
        value = (overrides or {}).get(variable)
        if value is None or str(value).strip() == '':
            continue
        if isinstance(package, tuple):
            package = release.get('kernel_package') or [name for name in package if name in versions][0]
        versions[package] = str(value).strip()
    return versions


def driver_branch(driver_version):
    """'580.95.05' (nvidia-smi's driver_version, first GPU) -> '580'; None when there is none."""
    lines = [line.strip() for line in str(driver_version or '').splitlines() if line.strip()]
    match = re.match(r'^(\d{3})(\.|$)', lines[0]) if lines else None
    return match.group(1) if match else None


SPECIFIER_CLAUSE = re.compile(r'^(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)(\.\*)?$')


def _specifier(text):
    """The clauses of a Python version specifier (">=3.11,<3.14", "==3.11.*"): (operator, release, prefix)."""
    clauses = []
    for part in str(text if text is not None else '').split(','):
        match = SPECIFIER_CLAUSE.match(part.strip())
        if not match or (match.group(3) and match.group(1) not in ('==', '!=')):
            raise ReleaseSetError('python must be a version specifier such as ">=3.11,<3.14", got %r' % (text,))
        clauses.append((match.group(1), tuple(int(x) for x in match.group(2).split('.')), bool(match.group(3))))
    return clauses


def _release_tuple(version):
    match = re.match(r'^(\d+(?:\.\d+)*)', str(version).strip())
    if not match:
        raise ReleaseSetError('%r is not a Python version' % (version,))
    return tuple(int(x) for x in match.group(1).split('.'))


def _clause_holds(version, operator, release, prefix):
    if prefix:
        same = version[:len(release)] == release
        return same if operator == '==' else not same
    # Missing parts count as zero, as PEP 440 pads releases ("3.11" == "3.11.0").
    width = max(len(version), len(release))
    left = version + (0,) * (width - len(version))
    right = release + (0,) * (width - len(release))
    return {'>=': left >= right, '<=': left <= right, '>': left > right, '<': left < right,
            '==': left == right, '!=': left != right}[operator]


def python_fits(release, python_version):
    """Whether python3 ``X.Y.Z`` is one the set's wheels exist for."""
    version = _release_tuple(python_version)
    return all(_clause_holds(version, *clause) for clause in _specifier(release.get('python')))


def _fitting(sets, test):
    return [name for name in set_names(sets) if not release_problems(name, sets[name]) and test(sets[name])]


def node_errors(release, branch, branch_source, python_version, sets):
    """Why the node cannot run ``release``: its driver branch is below the set's minimum, or its
    python3 is not one the set's wheels exist for. Unknown values (None) are not judged."""
    sets = _sets(sets)
    name = release['name']
    problems = []
    minimum = int(release['driver_branch_min'])
    if branch is not None and int(branch) < minimum:
        others = _fitting(sets, lambda other: int(other['driver_branch_min']) <= int(branch))
        problems.append(
            'sglang_release_set %s needs NVIDIA driver branch %d or later (CUDA %s), but the node\'s driver is branch %s'
            ' (%s). Raise gpu_vm_driver_branch to %d or later, or pick a release set that branch %s runs%s. %s'
            % (name, minimum, release['cuda'], branch, branch_source, minimum, branch,
               ' (%s)' % ', '.join(others) if others else ' (none ships)', NOTHING_CHANGED))
    if python_version is not None and not python_fits(release, python_version):
        others = _fitting(sets, lambda other: python_fits(other, python_version))
        problems.append(
            'sglang_release_set %s needs python3 %s (the Python versions its wheels exist for), but the node\'s'
            ' /usr/bin/python3 is %s. Pick a release set for Python %s%s, or use an OS image whose python3 the set'
            ' supports. %s'
            % (name, release['python'], python_version, python_version,
               ' (%s)' % ', '.join(others) if others else ' (none ships)', NOTHING_CHANGED))
    return problems


def node_driver(branch, nvidia_smi_output):
    """The node's driver branch and where it was read: ``branch`` when given (sglang_driver_branch),
    else the first GPU's driver_version in nvidia-smi's output; (None, None) when neither says."""
    if str(branch if branch is not None else '').strip():
        return str(branch).strip(), 'sglang_driver_branch is %s' % str(branch).strip()
    found = driver_branch(nvidia_smi_output)
    if found is None:
        return None, None
    return found, 'nvidia-smi reports driver %s' % str(nvidia_smi_output).strip().splitlines()[0].strip()


def release_errors(name, sets, branch=None, nvidia_smi_output=None, python_version=None):
    """Every reason not to install set ``name`` on this node: not a shipped set, an incomplete set,
    a driver branch below its minimum, a python3 its wheels do not exist for."""
    try:
        release = release_set(name, sets)
    except ReleaseSetError as exc:
        return [str(exc)]
    node_branch, source = node_driver(branch, nvidia_smi_output)
    python_version = str(python_version).strip() if python_version is not None and str(python_version).strip() else None
    return node_errors(release, node_branch, source, python_version, sets)


def arguments_check_plan(release, release_installed, running_venv, check=None):
    """How a deploy's plan checks the server arguments before anything changes: against ``venv``, the
    release set's own venv when installed already (``release_installed``: an upgrade tried before, a
    switch back), else the one the node runs (``running_venv``; empty: nothing to check against).
    With the check's result (``check``: ``accepted``, ``sglang_version``, ``errors``, ``message``),
    ``stop`` is the refusal that stops the plan and ``note`` a refusal that this deploy makes moot:
    the SGLang running now refused, but the deploy installs another release (a new release set renames
    flags), which checks the arguments after its install, before the server switches to it."""
    venv = release['venv_path'] if release_installed else (running_venv or '')
    verdict = {'venv': venv, 'stop': '', 'note': ''}
    if not venv or not check or check.get('accepted', True):
        return verdict
    if release_installed or check.get('sglang_version') in ('', release['version']):
        verdict['stop'] = check['message']
    else:
        verdict['note'] = (
            'Note: the SGLang %s installed now does not accept the server arguments (%s). Expected: this deploy '
            'installs SGLang %s (release set %s) into %s beside it and checks them against it after the install, '
            'before the server switches to it.'
            % (check['sglang_version'], '; '.join(check.get('errors') or ()), release['version'], release['name'],
               release['venv_path']))
    return verdict
