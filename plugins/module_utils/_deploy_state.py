# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deploy left on a node, and whether a deploy of the same inputs would change it.

A converge that ends healthy writes a small record on the node: the inputs fingerprint (every
documented variable of gpu_vm, sglang and sglang_server as it resolves for the node, and the
collection's own code) and what that converge left behind - the checksum of each file it
manages, the Debian packages it installed with their versions and holds, each Python
distribution in the venv with its version, the server unit active, the boot it ran in.

The plan of a later run asks one question per node: is the record there, does it name this
run's fingerprint, and is every artefact it lists still as it was? Yes: the node is *current*
and nothing of its stack needs converging. No record and no history: the node is *new*.
Anything else *changes*, with the reasons a user can act on.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json
import os

from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (
    DistRecordError,
    find_distribution,
    load_record,
    resolve,
)
from ansible_collections.inferops.serving.plugins.module_utils._fleet import node_plan_state

RECORD_FORMAT = 1
# What the fingerprint covers of the collection itself: the roles that build the stack, the
# step that chains them, and every plugin they run.
CODE_PATHS = ('roles/gpu_vm', 'roles/sglang', 'roles/sglang_server', 'roles/serving/tasks/steps/converge.yml', 'plugins')
# The roles whose documented variables make the stack.
STACK_ROLES = ('gpu_vm', 'sglang', 'sglang_server')
# Layers a converge can leave alone when their own inputs are those of the last healthy
# converge and the node is as it left them: the code each depends on (the plugins it runs).
# gpu_vm also installs the CUDA toolkit of the SGLang release set, so the sets are its inputs too.
# The server's layer (sglang_server) always converges: it is what rollouts and experiments change.
LAYER_CODE_PATHS = {
    'gpu_vm': ('roles/gpu_vm', 'plugins', 'roles/sglang/vars/release_sets.yml'),
    'sglang': ('roles/sglang', 'plugins'),
}
# Variables of other roles that a layer's converge depends on, besides its own.
LAYER_EXTRA_INPUTS = {'gpu_vm': ('sglang_release_set',)}
# Layers whose converge takes what a layer beneath publishes (sglang builds against the CUDA
# toolkit and driver branch gpu_vm installed): left alone only with those left alone too.
LAYERS_BENEATH = {'sglang': ('gpu_vm',)}
# A long drift list helps nobody: the first few name the problem.
MAX_REASONS_PER_KIND = 5


class DeployStateError(Exception):
    """A record that cannot be read or written."""


def canonical_digest(value):
    """sha256 of the canonical JSON of ``value`` (sorted keys; anything else as its text)."""
    text = json.dumps(value, sort_keys=True, separators=(',', ':'), default=str)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def code_digest(root, paths=CODE_PATHS):
    """sha256 over the relative path and content of every file under ``paths`` below ``root``."""
    digest = hashlib.sha256()
    for part in paths:
        top = os.path.join(root, part)
        if os.path.isfile(top):
            files = [top]
        else:
            files = []
            for folder, dirs, names in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d != '__pycache__')
                files.extend(os.path.join(folder, name) for name in sorted(names) if not name.endswith('.pyc'))
        for path in files:
            digest.update(os.path.relpath(path, root).encode('utf-8') + b'\0')
            with open(path, 'rb') as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def inputs_fingerprint(variables, code):
    """The fingerprint of a deploy's inputs: the resolved variables and the code digest."""
    return canonical_digest({'variables': variables, 'code': code})


def file_checksum(path):
    """sha256 of a file, or None when it does not exist."""
    try:
        with open(path, 'rb') as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except (IOError, OSError):
        return None


def dpkg_packages(status_text, names):
    """name -> 'VERSION', 'VERSION held' or None (not installed), from /var/lib/dpkg/status."""
    wanted = set(names)
    found = dict((name, None) for name in names)
    for paragraph in status_text.split('\n\n'):
        fields = {}
        for line in paragraph.splitlines():
            if line[:1] in (' ', '\t') or ':' not in line:
                continue
            key, value = line.split(':', 1)
            fields[key] = value.strip()
        name = fields.get('Package')
        if name not in wanted:
            continue
        status = fields.get('Status', '').split()
        if len(status) == 3 and status[2] == 'installed':
            found[name] = fields.get('Version', '') + (' held' if status[0] == 'hold' else '')
    return found


def site_packages_dirs(venv):
    """The venv's lib/pythonX.Y/site-packages folders (no interpreter started); lib64 is often a
    link to lib, and each folder counts once."""
    found = {}
    for lib in ('lib', 'lib64'):
        base = os.path.join(venv, lib)
        try:
            names = sorted(os.listdir(base))
        except (IOError, OSError):
            continue
        for name in names:
            path = os.path.join(base, name, 'site-packages')
            if name.startswith('python') and os.path.isdir(path):
                found.setdefault(os.path.realpath(path), path)
    return list(found.values())


def absolute_files(files, venv):
    """Absolute paths of ``files``: a relative one is a path inside the venv's site-packages (as pip's
    RECORD and the patches name them)."""
    dirs = site_packages_dirs(venv) if venv else []
    absolute = []
    for path in files:
        if not os.path.isabs(path) and dirs:
            path = next((os.path.join(d, path) for d in dirs if os.path.exists(os.path.join(d, path))),
                        os.path.join(dirs[0], path))
        absolute.append(path)
    return absolute


def distribution_state(search_dirs, name, hashed_paths):
    """{'version', 'drifted'}: the installed version (None if absent) and every file of its RECORD
    that is missing or has another size than pip wrote. Files in ``hashed_paths`` are checked by
    checksum elsewhere (a patch changes them on purpose) and skipped here."""
    try:
        dist = find_distribution(search_dirs, name)
        if dist is None:
            return {'version': None, 'drifted': []}
        entries = load_record(dist)
    except DistRecordError as exc:
        return {'version': None, 'drifted': [str(exc)]}
    drifted = []
    for entry in entries:
        if entry['size'] is None:
            continue
        path = resolve(dist['site_packages'], entry['path'])
        if path in hashed_paths:
            continue
        try:
            size = os.stat(path).st_size
        except (IOError, OSError):
            drifted.append('%s is missing' % path)
            continue
        if size != entry['size']:
            drifted.append('%s has %d bytes, pip wrote %d' % (path, size, entry['size']))
    return {'version': dist['version'], 'drifted': drifted}


def observe(spec, read_text, service_state):
    """What the node has now of the artefacts ``spec`` lists.

    ``spec``: {'files': [path], 'packages': [name], 'venv': path, 'distributions': [name],
    'service': unit}; ``read_text(path)`` returns a file's text or None; ``service_state(unit)``
    returns systemd's ActiveState.
    """
    files = dict((path, file_checksum(path)) for path in spec.get('files') or [])
    packages = dpkg_packages(read_text('/var/lib/dpkg/status') or '', spec.get('packages') or [])
    dirs = site_packages_dirs(spec['venv']) if spec.get('venv') else []
    distributions = dict((name, distribution_state(dirs, name, files)) for name in spec.get('distributions') or [])
    return {
        'files': files,
        'packages': packages,
        'distributions': distributions,
        'service': service_state(spec['service']) if spec.get('service') else None,
        'boot_id': (read_text('/proc/sys/kernel/random/boot_id') or '').strip(),
    }


def new_record(fingerprint, spec, observed, layers=None):
    """The record a healthy converge leaves: what it was given and what it left.

    ``layers``: layer name -> the fingerprint of that layer's own inputs (see ``same_layers``).
    """
    return {
        'format': RECORD_FORMAT,
        'fingerprint': fingerprint,
        'layers': dict(layers or {}),
        'files': observed['files'],
        'packages': observed['packages'],
        'venv': spec.get('venv') or None,
        'distributions': dict((name, state['version']) for name, state in observed['distributions'].items()),
        'service': spec.get('service') or None,
        'boot_id': observed['boot_id'],
    }


def record_spec(record):
    """The artefacts a record lists, in the form ``observe`` takes."""
    return {'files': sorted(record.get('files') or {}), 'packages': sorted(record.get('packages') or {}),
            'venv': record.get('venv'), 'distributions': sorted(record.get('distributions') or {}),
            'service': record.get('service')}


def _limited(kind, reasons):
    if len(reasons) <= MAX_REASONS_PER_KIND:
        return reasons
    return reasons[:MAX_REASONS_PER_KIND] + ['and %d more %s' % (len(reasons) - MAX_REASONS_PER_KIND, kind)]


def _package_reasons(record, observed):
    reasons = []
    for name, state in sorted((record.get('packages') or {}).items()):
        now = observed['packages'].get(name)
        if now != state:
            reasons.append('package %s is %s, the last deploy left %s'
                           % (name, now or 'not installed', state or 'it not installed'))
    return _limited('packages', reasons)


def _distribution_reasons(record, observed):
    reasons = []
    for name, version in sorted((record.get('distributions') or {}).items()):
        now = observed['distributions'].get(name) or {'version': None, 'drifted': []}
        if now['version'] != version:
            reasons.append('%s is %s in %s, the last deploy left %s' % (
                name, now['version'] or 'not installed', record.get('venv'), version))
        reasons += now['drifted']
    return _limited('files of the venv', reasons)


def _boot_reasons(boot_id, observed, since='the last deploy'):
    if boot_id != observed['boot_id']:
        return ['the node restarted since %s (its GPUs and topology are read again)' % since]
    return []


def _artefact_reasons(record, observed):
    reasons = _limited('files', ['%s %s since the last deploy'
                                 % (path, 'is missing' if observed['files'].get(path) is None else 'changed')
                                 for path in changed_files(record, observed)])
    reasons += _package_reasons(record, observed)
    reasons += _distribution_reasons(record, observed)
    if record.get('service') and observed['service'] != 'active':
        reasons.append('%s is %s, not active' % (record['service'], observed['service'] or 'unknown'))
    return reasons


def _format_reasons(record):
    if record.get('format') != RECORD_FORMAT:
        return ['the deploy record is of another format (%s)' % record.get('format')]
    return []


def drift(record, fingerprint, observed):
    """Why a node whose last healthy converge left ``record`` is not current; [] when it is."""
    reasons = _format_reasons(record)
    if reasons:
        return reasons
    if record.get('fingerprint') != fingerprint:
        reasons.append('the inputs differ from those of the last deploy (variables, versions or the collection)')
    return reasons + _boot_reasons(record.get('boot_id'), observed) + _artefact_reasons(record, observed)


def snapshot_blockers(record, observed):
    """Why the files ``record`` lists cannot be kept for an experiment's rollback: the node is not as
    the record says; [] when it is. A restart since the record does not block: the files are what
    they were, and the snapshot keeps the boot it was taken in (``restore_blockers``)."""
    return _format_reasons(record) or _artefact_reasons(record, observed)


def restore_blockers(snapshot, observed, snapshot_boot_id=None):
    """Why putting the files of ``snapshot`` (a record taken before an experiment, in the boot
    ``snapshot_boot_id``; the record's own boot when None) back would not bring the node back to it:
    packages, Python distributions or the boot changed since; [] when the files alone do."""
    boot_id = snapshot_boot_id or snapshot.get('boot_id')
    return _boot_reasons(boot_id, observed, 'the files were kept') + _package_reasons(snapshot, observed) + \
        _distribution_reasons(snapshot, observed)


def changed_files(record, observed):
    """The files of ``record`` whose content differs now (None in the record: a file that was not there)."""
    return sorted(path for path, checksum in (record.get('files') or {}).items()
                  if observed['files'].get(path) != checksum)


def stored_name(path):
    """The name a file's copy has in a snapshot folder."""
    return hashlib.sha256(path.encode('utf-8')).hexdigest()[:32]


def same_layers(record, fingerprint, layers, observed):
    """The layers a converge may leave alone: the node is as the record says apart from its inputs,
    and these layers' own inputs (``layers``: name -> fingerprint) are the recorded ones."""
    if not record or drift(record, record.get('fingerprint'), observed):
        return []
    recorded = record.get('layers') or {}
    same = set(name for name, layer in (layers or {}).items() if layer and recorded.get(name) == layer)
    return sorted(name for name in same if same.issuperset(LAYERS_BENEATH.get(name, ())))


def untouched_layers(variables, layer_variables):
    """The layers a converge that sets ``variables`` (an experiment's overlay) leaves as they are:
    none of the layer's own variables (``layer_variables``: layer -> its role's documented
    variables), nor those it also reads, nor any layer beneath it is among them."""
    variables = set(variables)
    touched = set(name for name in LAYER_CODE_PATHS
                  if variables & (set(layer_variables.get(name) or ()) | set(LAYER_EXTRA_INPUTS.get(name, ()))))
    while True:
        above = set(name for name, beneath in LAYERS_BENEATH.items() if touched.intersection(beneath)) - touched
        if not above:
            return sorted(set(LAYER_CODE_PATHS) - touched)
        touched |= above


def layer_entry_point(layer, as_recorded):
    """The entry point of a layer's role that a converge runs: ``installation`` (publish what the
    role manages, change nothing) for a layer in ``as_recorded`` (same_layers, untouched_layers),
    else ``main``."""
    if layer not in LAYER_CODE_PATHS:
        raise ValueError('%r is not a layer of the stack (%s)' % (layer, ', '.join(sorted(LAYER_CODE_PATHS))))
    return 'installation' if layer in (as_recorded or ()) else 'main'


def plan_state(record, fingerprint, observed, deployed_before):
    """('new' | 'changes' | 'current', reasons).

    ``deployed_before``: the node has a history (deployed by a release without records).
    """
    if record is None:
        reasons = (['no deploy record: the node was deployed before records were kept'] if deployed_before
                   else ['never deployed'])
        return node_plan_state(deployed_before, True), reasons
    reasons = drift(record, fingerprint, observed)
    return node_plan_state(True, bool(reasons)), reasons


def parse_record(text, path):
    """A record file's text -> dict (DeployStateError when it is not one)."""
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise DeployStateError('%s is not a deploy record (%s): remove it and deploy again' % (path, exc))
    if not isinstance(record, dict):
        raise DeployStateError('%s is not a deploy record: remove it and deploy again' % path)
    return record


def record_text(record):
    return json.dumps(record, sort_keys=True, indent=1) + '\n'
