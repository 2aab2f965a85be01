# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which pinned packages of the sglang role the package index must be asked about, and what it said.

Before anything is installed, the role lists the venv (``pip list --format=json``), asks the index
(``pip index versions PACKAGE``) only about pins that are not installed yet, and refuses a pin the
index does not offer with a message that names the variable to change.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import re

# The variable that overrides the release set's pin of each package of the sglang role.
PIN_VARIABLES = {
    'sglang': 'sglang_version',
    'flashinfer-python': 'sglang_flashinfer_version',
    'flashinfer-cubin': 'sglang_flashinfer_cubin_version',
    'sgl-kernel': 'sglang_sgl_kernel_version',
    # sgl-kernel's name from SGLang 0.5.23 on; the same variable pins whichever a release set names.
    'sglang-kernel': 'sglang_sgl_kernel_version',
    'torch': 'sglang_torch_version',
}


def parse_pip_index_versions(text):
    """Versions listed by ``pip index versions NAME`` ("Available versions: 1.2, 1.1")."""
    for line in (text or '').splitlines():
        if line.strip().startswith('Available versions:'):
            return [item.strip() for item in line.split(':', 1)[1].split(',') if item.strip()]
    return []


def _canonical(name):
    return re.sub(r'[-_.]+', '-', str(name)).lower()


def pins_to_look_up(pip_list, versions, packages):
    """Packages of ``packages`` whose pinned version (``versions``: name -> version) is not installed.

    ``pip_list`` is the output of ``pip list --format=json`` (text or parsed), or a list of
    ``name==version`` strings; an unreadable one means nothing is known to be installed. A rerun
    with everything in place asks the index nothing.
    """
    if isinstance(pip_list, str):
        try:
            pip_list = json.loads(pip_list or '[]')
        except ValueError:
            pip_list = []
    installed = {}
    for item in pip_list if isinstance(pip_list, list) else []:
        if isinstance(item, dict):
            installed[_canonical(item.get('name'))] = str(item.get('version'))
        elif isinstance(item, str) and '==' in item:
            name, dummy, installed_version = item.partition('==')
            installed[_canonical(name)] = installed_version
    return [name for name in packages if installed.get(_canonical(name)) != str(versions.get(name))]


def missing_pins(versions, listings):
    """Messages for every pinned version the index does not offer.

    ``versions``: package -> pinned version; ``listings``: package -> ``{'rc', 'stdout', 'stderr'}``
    of ``pip index versions PACKAGE``, or the results of a looped task whose items are the packages
    (packages that were not looked up are skipped).
    """
    if isinstance(listings, list):
        # The results of a looped command task: one per package, named by its loop item.
        listings = dict((result.get('item'), result) for result in listings
                        if isinstance(result, dict) and not result.get('skipped'))
    problems = []
    for package in sorted(listings):
        if package not in versions:
            continue
        variable = PIN_VARIABLES.get(package, package)
        version = str(versions[package])
        listing = listings[package] or {}
        available = parse_pip_index_versions(listing.get('stdout', ''))
        if listing.get('rc', 0) != 0 or not available:
            reason = [line for line in (listing.get('stderr') or listing.get('stdout') or '').strip().splitlines()
                      if 'experimental' not in line]
            problems.append('%s: the package index does not offer %s at all (%s); check the package name and'
                            ' the index in sglang_pip_extra_args. Nothing was installed or written.'
                            % (variable, package, reason[-1] if reason else 'no versions listed'))
        elif version not in available:
            problems.append('%s is %r, but the package index offers %s only in: %s. Pick one of those; nothing'
                            ' was installed or written.'
                            % (variable, version, package, ', '.join(available[:12])
                               + (', ...' if len(available) > 12 else '')))
    return problems
