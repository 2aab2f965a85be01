# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._commands import nvidia_smi_listing_problems as _listing_problems
from ansible_collections.inferops.serving.plugins.module_utils._nvidia_packages import (
    NvidiaPackagesError,
    cuda_repo_path as _cuda_repo_path,
    driver_packages as _driver_packages,
)


def cuda_repo_path(distribution, version, architecture):
    try:
        return _cuda_repo_path(distribution, version, architecture)
    except NvidiaPackagesError as exc:
        raise AnsibleFilterError(str(exc))


def nvidia_driver_packages(branch, distribution):
    try:
        return _driver_packages(branch, distribution)
    except NvidiaPackagesError as exc:
        raise AnsibleFilterError(str(exc))


def nvidia_smi_listing_problems(result, expected_gpus, bound):
    """Why a registered ``timeout BOUND nvidia-smi --query-gpu=...`` result does not list the GPUs."""
    return _listing_problems(result.get('rc'), result.get('stdout'), result.get('stderr'), expected_gpus, bound)


class FilterModule(object):
    def filters(self):
        return {
            'cuda_repo_path': cuda_repo_path,
            'nvidia_driver_packages': nvidia_driver_packages,
            'nvidia_smi_listing_problems': nvidia_smi_listing_problems,
        }
