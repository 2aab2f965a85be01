# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._deploy_state import layer_entry_point as _layer_entry_point
from ansible_collections.inferops.serving.plugins.module_utils._deployment import (
    DeploymentError,
    fingerprint,
    patch_state,
    record,
    tensor_parallel_size,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import (
    ServerArgumentsError,
    server_port as _server_port,
)


def deployment_fingerprint(stack, server):
    try:
        return fingerprint(stack, server)
    except DeploymentError as exc:
        raise AnsibleFilterError(str(exc))


def deployment_record(stack, server, experiment=None):
    try:
        return record(stack, server, experiment)
    except DeploymentError as exc:
        raise AnsibleFilterError(str(exc))


def layer_entry_point(layer, as_recorded=None):
    try:
        return _layer_entry_point(layer, as_recorded)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def tp_size(args, extra_args=None):
    try:
        return tensor_parallel_size(args, extra_args)
    except DeploymentError as exc:
        raise AnsibleFilterError('sglang_server_args / sglang_server_extra_args: %s' % exc)


def server_port(args, extra_args=None, default=None):
    try:
        return _server_port(args, extra_args, default)
    except ServerArgumentsError as exc:
        raise AnsibleFilterError('sglang_server_args / sglang_server_extra_args: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {
            'deployment_fingerprint': deployment_fingerprint,
            'deployment_record': deployment_record,
            'layer_entry_point': layer_entry_point,
            'tp_size': tp_size,
            'server_port': server_port,
            'patch_state_on_disk': patch_state,
        }
