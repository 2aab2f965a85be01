# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a source patch fits the releases the sglang role pins, before anything is installed.

A patch's anchors are lines read from one release of each distribution it edits (the ``version``
of each of its files). The patch module refuses another installed release file by file, but by then
pip has already installed it into the serving venv; this check refuses the pins themselves.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._pip_pins import PIN_VARIABLES


def releases_of(patch):
    """Distribution -> sorted versions the patch's files were written for, in the files' order."""
    releases = {}
    for spec in (patch or {}).get('files') or []:
        versions = releases.setdefault(spec['distribution'], [])
        if str(spec['version']) not in versions:
            versions.append(str(spec['version']))
    return releases


def patch_release_errors(patch, pinned, switch, installed=None):
    """One message when a pinned version is not one the patch fits, or a distribution it edits is
    not installed; else none.

    ``pinned``: pin variable (``sglang_version``) -> version; ``switch``: the variable that turns
    the patch on, named in the message as the way out; ``installed``: the packages the role
    installs, or None when it installs their dependencies too (every distribution is there).
    """
    releases = releases_of(patch)
    wrong = []
    for distribution, versions in releases.items():
        variable = PIN_VARIABLES.get(distribution)
        if variable in pinned and str(pinned[variable]) not in versions:
            wrong.append('%s is %s' % (variable, pinned[variable]))
    absent = [distribution for distribution in releases if installed is not None and distribution not in installed]
    if absent:
        wrong.append('sglang_packages installs %s, not %s' % (', '.join(installed) or 'nothing', ', '.join(absent)))
    if not wrong:
        return []
    fits = ' and '.join('%s %s' % (distribution, ' or '.join(versions)) for distribution, versions in releases.items())
    return ['%s: the %s patch fits %s only (its anchors were read from those releases), but %s. Set %s to false,'
            ' or pin and install the releases it fits. Nothing was changed on this host.'
            % (switch, patch.get('name', 'source'), fits, ' and '.join(wrong), switch)]
