# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._inputs import (
    missing_pins,
    role_input_errors,
    serial,
)


def input_errors(variables, role):
    return role_input_errors(role, variables)


def serial_errors(value, name='deploy_serial'):
    return serial(name, value)


def missing_versions(listings, pins):
    return missing_pins(pins, listings)


class FilterModule(object):
    def filters(self):
        return {
            'input_errors': input_errors,
            'serial_errors': serial_errors,
            'missing_versions': missing_versions,
        }
