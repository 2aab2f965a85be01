# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._benchmark_summary import summary


def benchmark_summary(result):
    return summary(result)


class FilterModule(object):
    def filters(self):
        return {
            'benchmark_summary': benchmark_summary,
        }
