# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.serving.plugins.module_utils._report import (
    ReportError,
    redact,
    throughput_chart_svg,
    topology_grid,
    topology_text,
)
from ansible_collections.inferops.serving.plugins.module_utils._report_view import report_view


def _guarded(function):
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ReportError as exc:
            raise AnsibleFilterError(str(exc))
    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


class FilterModule(object):
    def filters(self):
        return {
            'throughput_chart_svg': _guarded(throughput_chart_svg),
            'topology_grid': _guarded(topology_grid),
            'topology_text': _guarded(topology_text),
            'redact_secrets': _guarded(redact),
            'report_view': _guarded(report_view),
        }
