# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._experiment import (
    ExperimentError,
    plan,
    refusal_message,
)
from ansible_collections.inferops.serving.plugins.module_utils._serving_benchmark import (
    ServingBenchmarkError,
    decide,
)


def experiment_plan(experiments, name, topology, force=False, current=None, known_variables=None):
    try:
        return plan(experiments, name, topology, force=force, current=current, known_variables=known_variables)
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc))


def experiment_refusal(planned, node):
    return refusal_message(planned, node)


def experiment_decision(baseline, candidate, max_regression=0.1, healthy=True):
    try:
        return decide(baseline, candidate, max_regression, healthy)
    except ServingBenchmarkError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {
            'experiment_plan': experiment_plan,
            'experiment_refusal': experiment_refusal,
            'experiment_decision': experiment_decision,
        }
