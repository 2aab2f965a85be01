# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Python imports this module at start-up when this folder is first on PYTHONPATH (the tests of
test_sglang_launch_real_releases.py put ../cpu_stubs and the release after it): the GPU-only
packages become stand-ins, and the HTTP server's start is the probe of real_release_probe.py."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import sglang_cpu_stubs  # pylint: disable=import-error
import real_release_probe  # pylint: disable=import-error

sglang_cpu_stubs.install()
real_release_probe.install()
