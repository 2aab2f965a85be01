# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._sglang_release_sets import (
    ReleaseSetError,
    arguments_check_plan,
    launch_entry,
    pinned_versions,
    release_errors,
    release_set,
)
from ansible_collections.inferops.serving.plugins.module_utils._sglang_venvs import VenvError, venv_name


def sglang_release_errors(name, sets, branch=None, nvidia_smi_output=None, python_version=None):
    try:
        return release_errors(name, sets, branch, nvidia_smi_output, python_version)
    except ReleaseSetError as exc:
        return [str(exc)]


def sglang_arguments_check_plan(release, release_installed, running_venv, check=None):
    return arguments_check_plan(release, release_installed, running_venv, check)


def sglang_release(name, sets):
    try:
        return release_set(name, sets)
    except ReleaseSetError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_launch_entry(launch, package='sglang'):
    try:
        return launch_entry(launch, package)
    except ReleaseSetError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_release_versions(release, overrides=None):
    if not isinstance(release, dict) or 'packages' not in release:
        raise AnsibleFilterError('sglang_release_versions: give a release set (inferops.serving.sglang_release)')
    return pinned_versions(release, overrides)


def sglang_venv_name(name, versions, packages, install_dependencies):
    try:
        return venv_name(name, versions, packages, install_dependencies)
    except VenvError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {
            'sglang_arguments_check_plan': sglang_arguments_check_plan,
            'sglang_launch_entry': sglang_launch_entry,
            'sglang_release': sglang_release,
            'sglang_release_errors': sglang_release_errors,
            'sglang_release_versions': sglang_release_versions,
            'sglang_venv_name': sglang_venv_name,
        }
