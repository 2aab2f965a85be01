# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deployment runs with, as the roles publish it, reduced to one fingerprint.

Two deployments with the same fingerprint run the same code with the same configuration:
every pinned version, the patch state proven on disk, the model (path and revision), the
server module and arguments, and the unit and environment file as written. The history keeps
one deploy record per fingerprint, and a baseline benchmark counts only for its fingerprint.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import json

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import (
    ServerArgumentsError,
    effective_arguments,
    whole_number,
)


class DeploymentError(Exception):
    """A published fact that lacks what the fingerprint needs."""


def tensor_parallel_size(*layers):
    """The tensor-parallel size the server arguments ask for, later layers winning; None if unset.

    Each layer is a mapping flag -> value as in sglang_server_args, merged as the server role
    merges them (``_server_arguments.layers``).
    """
    value = effective_arguments(*layers).get('tp-size')
    if value is None:
        return None
    try:
        return whole_number('tp-size', value)
    except ServerArgumentsError as exc:
        raise DeploymentError(str(exc))


def fingerprint_inputs(stack, server):
    """The parts of the two published facts that make a deployment what it is."""
    stack = stack or {}
    server = server or {}
    missing = [key for key in ('versions', 'patches') if key not in stack]
    missing += ['server.%s' % key for key in ('unit_checksum', 'env_checksum', 'model_path') if key not in server]
    if missing:
        raise DeploymentError('cannot fingerprint the deployment: the published facts lack %s' % ', '.join(missing))
    return {
        'versions': dict(stack['versions']),
        'packages': sorted(stack.get('packages') or []),
        'patches': dict((name, (state or {}).get('files', state)) for name, state in stack['patches'].items()),
        'model': {'path': server['model_path'], 'revision': server.get('revision')},
        'module': server.get('module'),
        'args': server.get('args') or {},
        'unit': server['unit_checksum'],
        'env_file': server['env_checksum'],
    }


def fingerprint(stack, server):
    """sha256 over the canonical JSON of ``fingerprint_inputs``."""
    text = json.dumps(fingerprint_inputs(stack, server), sort_keys=True, separators=(',', ':'), default=str)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def record(stack, server, experiment=None):
    """The history's ``deploy`` record of a healthy converge of ``stack`` (sglang_installation) and
    ``server`` (sglang_server_deployment): its fingerprint, the experiment under test (None: the
    inventory's baseline), where the server answers and what it runs (what the plays that do not
    converge, and a rollback to this deploy, read), and the installation it runs from."""
    try:
        return {
            'fingerprint': fingerprint(stack, server),
            'experiment': experiment,
            'server': {
                'url': server['url'],
                'model': server['model'],
                'model_path': server['model_path'],
                'revision': server['revision'],
                'module': server['module'],
                # The endpoint that means ready on this release: what a rollback to this deploy waits for.
                'ready_path': server['ready_path'],
                'args': server['args'],
                'from_topology': server['from_topology'],
                'env': server['environment'],
                'python': server['python'],
            },
            'release_set': stack['release_set']['name'],
            'venv': stack['venv_path'],
            'versions': stack['versions'],
            'patches': stack['patches'],
            'sm120_allreduce_fusion_patch': stack['patches']['sm120_allreduce_fusion']['state'] == 'present',
        }
    except KeyError as exc:
        raise DeploymentError('cannot record the deployment: the published facts lack %s' % exc)


def patch_state(result):
    """Each patched file's state after an anchored_patch run, path -> pristine|patched|drifted|missing.

    ``result`` is the module's result; a skipped run (check mode before the first install)
    proves nothing and gives an empty mapping.
    """
    after = {}
    for entry in (result or {}).get('files') or []:
        action = entry.get('action')
        after[entry['path']] = {'patch': 'patched', 'restore': 'pristine'}.get(action, entry.get('status'))
    return after
