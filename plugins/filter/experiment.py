# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._experiment import (
    ExperimentError,
    decide,
    plan,
    refusal_message,
    role_options,
)

# The roles an experiment may change; their meta/argument_specs.yml say which variables exist.
OVERLAY_ROLES = ('gpu_vm', 'sglang', 'sglang_server')
_COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _documented_options():
    specs = []
    for role in OVERLAY_ROLES:
        path = os.path.join(_COLLECTION, 'roles', role, 'meta', 'argument_specs.yml')
        try:
            with open(path) as handle:
                specs.append(yaml.safe_load(handle))
        except (IOError, OSError, yaml.YAMLError) as exc:
            raise AnsibleFilterError('cannot read the documented variables of role %s (%s): %s' % (role, path, exc))
    return role_options(specs)


def experiment_plan(experiments, name, topology, force=False, current=None):
    options = _documented_options()
    try:
        return plan(experiments, name, topology, force=force, current=current,
                    known_variables=list(options), defaults=options)
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc))


def experiment_refusal(planned, node):
    return refusal_message(planned, node)


def experiment_decision(baseline, candidate, max_regression=0.1, healthy=True, error=None):
    try:
        return decide(baseline, candidate, max_regression, healthy, error=error)
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {
            'experiment_plan': experiment_plan,
            'experiment_refusal': experiment_refusal,
            'experiment_decision': experiment_decision,
        }
