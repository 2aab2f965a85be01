# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Python imports this module at start-up when this folder is on PYTHONPATH: the GPU-only
packages of SGLang become the stand-ins of sglang_cpu_stubs.py (which says which and why)."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import sglang_cpu_stubs  # pylint: disable=import-error

sglang_cpu_stubs.install()
