# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._closing import campaign as _campaign_closing
from ansible_collections.inferops.serving.plugins.module_utils._closing import experiment as _experiment_closing
from ansible_collections.inferops.serving.plugins.module_utils._closing import hold_back as _hold_back_closing
from ansible_collections.inferops.serving.plugins.module_utils._closing import host_experiment as _host_experiment_closing
from ansible_collections.inferops.serving.plugins.module_utils._campaign import (
    CampaignError,
    plan as _campaign_plan,
    promotion as _campaign_promotion,
    start as _campaign_start,
    step as _campaign_step,
    table as _campaign_table,
)
from ansible_collections.inferops.serving.plugins.module_utils._correctness import line as _answers_line
from ansible_collections.inferops.serving.plugins.module_utils._deploy_state import untouched_layers
from ansible_collections.inferops.serving.plugins.module_utils._experiment import (
    ExperimentError,
    host_check_runtime,
    host_decide,
    host_plan,
    host_report,
    plan,
    refusal_message,
    role_options,
)
from ansible_collections.inferops.serving.plugins.module_utils import _trial

# The roles an experiment may change; their meta/argument_specs.yml say which variables exist.
OVERLAY_ROLES = ('gpu_vm', 'sglang', 'sglang_server')
_COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _documented_specs():
    """Role -> its parsed meta/argument_specs.yml."""
    specs = {}
    for role in OVERLAY_ROLES:
        path = os.path.join(_COLLECTION, 'roles', role, 'meta', 'argument_specs.yml')
        try:
            with open(path) as handle:
                specs[role] = yaml.safe_load(handle)
        except (IOError, OSError, yaml.YAMLError) as exc:
            raise AnsibleFilterError('cannot read the documented variables of role %s (%s): %s' % (role, path, exc))
    return specs


def experiment_plan(experiments, name, topology, force=False, current=None):
    specs = _documented_specs()
    options = role_options([specs[role] for role in OVERLAY_ROLES])
    try:
        planned = plan(experiments, name, topology, force=force, current=current,
                       known_variables=list(options), defaults=options)
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc))
    # The stack's layers (gpu_vm, sglang) a trial on a node as its record says may leave alone.
    planned['untouched_layers'] = untouched_layers(
        planned['overlay'].keys(), dict((role, role_options([spec])) for role, spec in specs.items()))
    return planned


def experiment_refusal(planned, node):
    return refusal_message(planned, node)


def trial_decision(planned, gate, baseline, candidate, healthy=True, error=None, lock=None):
    try:
        return _trial.decision(planned, gate, baseline, candidate, healthy, error, lock)
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc))


def experiment_closing(name, node, unit, planned=None, decision=None, failure=None, out_of_router=False):
    return _experiment_closing(name, node, unit, planned, decision, failure, bool(out_of_router))


def campaign_closing(name, node, failure, locked=False, out_of_router=False):
    return _campaign_closing(name, node, failure, bool(locked), bool(out_of_router))


def hold_back_closing(node, gate_message, routed=False, failure=None):
    return _hold_back_closing(node, gate_message, routed, failure)


def host_experiment_closing(name, vmid, vm_host, verdict=None, failure=None, locked=False, out_of_router=False):
    return _host_experiment_closing(name, vmid, vm_host, verdict, failure, locked, out_of_router)


def trial_restores_by_files(snapshot, before_url, deployment):
    return _trial.restores_by_files(snapshot, before_url, deployment)


def trial_outcome_record(planned, decision, baseline, candidate, lock=None, campaign=None, forced=False):
    return _trial.outcome_record(planned, decision, baseline, candidate, lock, campaign, forced)


def trial_rollback_record(planned, decision, error, fingerprint, restore, candidate_done, now):
    return _trial.rollback_record(planned, decision, error, fingerprint, restore, candidate_done, now)


def trial_report(planned, decision, node):
    return _trial.report(planned, decision, node)


def host_experiment_plan(experiments, name):
    try:
        return host_plan(experiments, name)
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc))


def host_experiment_decision(check, topology, evidence=None, error=None):
    return host_decide(check, topology, evidence=evidence, error=error)


def host_experiment_runtime(python, installation=None, latest_deploy=None, service_user='', service_group=''):
    return host_check_runtime(python or '', installation, latest_deploy, service_user or '', service_group or '')


def host_experiment_record(planned, verdict, vm_host, vmid, before=None, after=None):
    return _trial.host_outcome_record(planned, verdict, vm_host, vmid, before, after)


def host_experiment_rollback_record(planned, verdict, vm_host, vmid, started, now):
    return _trial.host_rollback_record(planned, verdict, vm_host, vmid, started, now)


def host_experiment_report(planned, verdict, node, vmid, vm_host, topology_before=None, topology_now=None):
    return host_report(planned, verdict, node, vmid, vm_host, topology_before, topology_now)


def answers_line(lock, min_agreement):
    return _answers_line(lock, min_agreement)


def campaign_plan(campaigns, name, experiments):
    try:
        return _campaign_plan(campaigns, name, experiments)
    except CampaignError as exc:
        raise AnsibleFilterError(str(exc))


def campaign_start(recent, measured, now):
    return _campaign_start(recent, measured, now)


def campaign_step(state, planned, decision=None, candidate=None, lock=None, objective='output_throughput'):
    return _campaign_step(state, planned, decision, candidate, lock, objective)


def campaign_table(rows, name, node, start, best, objective='output_throughput'):
    return _campaign_table(rows, name, node, start, best, objective)


def campaign_promotion(variables, name, node, kept):
    return _campaign_promotion(variables, name, node, kept)


class FilterModule(object):
    def filters(self):
        return {
            'experiment_plan': experiment_plan,
            'experiment_refusal': experiment_refusal,
            'trial_decision': trial_decision,
            'campaign_closing': campaign_closing,
            'experiment_closing': experiment_closing,
            'hold_back_closing': hold_back_closing,
            'host_experiment_closing': host_experiment_closing,
            'trial_restores_by_files': trial_restores_by_files,
            'trial_outcome_record': trial_outcome_record,
            'trial_rollback_record': trial_rollback_record,
            'trial_report': trial_report,
            'host_experiment_plan': host_experiment_plan,
            'host_experiment_decision': host_experiment_decision,
            'host_experiment_record': host_experiment_record,
            'host_experiment_report': host_experiment_report,
            'host_experiment_rollback_record': host_experiment_rollback_record,
            'host_experiment_runtime': host_experiment_runtime,
            'answers_line': answers_line,
            'campaign_plan': campaign_plan,
            'campaign_start': campaign_start,
            'campaign_step': campaign_step,
            'campaign_table': campaign_table,
            'campaign_promotion': campaign_promotion,
        }
