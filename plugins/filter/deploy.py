# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._closing import deploy as _deploy_closing
from ansible_collections.inferops.serving.plugins.module_utils._closing import message as _closing_message
from ansible_collections.inferops.serving.plugins.module_utils._closing import plan as _plan_closing
from ansible_collections.inferops.serving.plugins.module_utils._closing import stopped_by as _stopped_by
from ansible_collections.inferops.serving.plugins.module_utils._deploy_summary import summary


def deploy_closing(failure, release_set, out_of_router=False):
    return _deploy_closing(failure, release_set, out_of_router)


def closing_message(closing, node, unit, before=None, after=''):
    return _closing_message(closing, node, unit, before, after or '')


def plan_closing(node, reason=None, arguments_refused=False, failed_nodes=()):
    return _plan_closing(node, reason, bool(arguments_refused), list(failed_nodes or ()))


def stopped_by(result, task=None, fallback='the run failed'):
    return _stopped_by(result, task, fallback)


def deploy_summary(installation, deployment, topology, node, history_path, reports_dir, address=None):
    return summary(installation, deployment, topology or {}, node, history_path, reports_dir, address)


class FilterModule(object):
    def filters(self):
        return {
            'closing_message': closing_message,
            'deploy_closing': deploy_closing,
            'deploy_summary': deploy_summary,
            'plan_closing': plan_closing,
            'stopped_by': stopped_by,
        }
