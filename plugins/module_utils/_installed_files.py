# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of a role's files a node lacks, from one listing of what it holds.

A copy task per file costs one round trip per file on every run, also when nothing changed. A role
that installs a folder of files lists the node's copies once (ansible.builtin.find with their SHA-1)
and copies only the files whose content, mode or owner differ.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import posixpath


def out_of_date(wanted, installed, dest_root, mode, owner, group):
    """The names of WANTED ({relative name: SHA-1 of the role's file}) whose copy under DEST_ROOT is
    missing or differs in content, mode, owner or group, in the order of their names.

    INSTALLED is ansible.builtin.find's ``files`` for DEST_ROOT (with get_checksum)."""
    held = {}
    for found in installed or []:
        held[posixpath.relpath(found['path'], dest_root)] = (
            found.get('checksum'), found.get('mode'), found.get('pw_name'), found.get('gr_name'))
    return sorted(name for name, checksum in wanted.items() if held.get(name) != (checksum, mode, owner, group))
