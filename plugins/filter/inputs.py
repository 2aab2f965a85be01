# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._argument_types import type_errors
from ansible_collections.inferops.serving.plugins.module_utils._inputs import role_input_errors, serial
from ansible_collections.inferops.serving.plugins.module_utils._patch_releases import patch_release_errors
from ansible_collections.inferops.serving.plugins.module_utils._pip_pins import missing_pins, pins_to_look_up


def argument_type_errors(options, values):
    if not isinstance(options, dict) or not isinstance(values, (list, tuple)):
        raise AnsibleFilterError('argument_type_errors: give the options of an entry point and their values in order')
    return type_errors(options, dict(zip(sorted(options), values)))


def input_errors(variables, role):
    return role_input_errors(role, variables)


def serial_errors(value, name='serving_deploy_serial'):
    return serial(name, value)


def checked_serial(value, name='serving_deploy_serial'):
    problems = serial(name, value)
    if problems:
        raise AnsibleFilterError(problems[0] + ' Nothing was changed.')
    return value


def patch_releases_errors(patch, pinned, switch, installed=None):
    if not isinstance(patch, dict) or not isinstance(pinned, dict):
        raise AnsibleFilterError('patch_releases_errors: give a patch (name, files) and the pin variables')
    return patch_release_errors(patch, pinned, switch, installed)


def missing_versions(listings, versions):
    return missing_pins(versions, listings)


def packages_to_look_up(pip_list, versions, packages):
    return pins_to_look_up(pip_list, versions, packages)


class FilterModule(object):
    def filters(self):
        return {
            'argument_type_errors': argument_type_errors,
            'input_errors': input_errors,
            'serial_errors': serial_errors,
            'missing_versions': missing_versions,
            'checked_serial': checked_serial,
            'packages_to_look_up': packages_to_look_up,
            'patch_releases_errors': patch_releases_errors,
        }
