# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._inputs import serial
from ansible_collections.inferops.serving.plugins.module_utils._patch_releases import patch_release_errors
from ansible_collections.inferops.serving.plugins.module_utils._pip_pins import missing_pins, pins_to_look_up
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_packages import forwarded_key_errors


def checked_serial(value, name='serving_deploy_serial'):
    problems = serial(name, value)
    if problems:
        raise AnsibleFilterError(problems[0] + ' Nothing was changed.')
    return value


def router_forwarded_key_errors(server_key, router_host, package, client_key, server_host):
    return forwarded_key_errors(router_host, package, client_key, server_key, server_host)


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
            'missing_versions': missing_versions,
            'checked_serial': checked_serial,
            'packages_to_look_up': packages_to_look_up,
            'patch_releases_errors': patch_releases_errors,
            'router_forwarded_key_errors': router_forwarded_key_errors,
        }
