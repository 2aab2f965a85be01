# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import hashlib
import os

from ansible.errors import AnsibleFilterError
from ansible_collections.inferops.serving.plugins.module_utils._installed_files import out_of_date


def _sha1(path):
    # A role's own files: small enough to read whole.
    with open(path, 'rb') as handle:
        return hashlib.sha1(handle.read()).hexdigest()


def files_out_of_date(names, source_root, installed, dest_root, mode, owner='root', group='root'):
    try:
        wanted = dict((name, _sha1(os.path.join(source_root, name))) for name in names)
    except (IOError, OSError) as error:
        raise AnsibleFilterError('files_out_of_date: cannot read %s: %s' % (error.filename, error.strerror))
    return out_of_date(wanted, installed, dest_root, mode, owner, group)


class FilterModule(object):
    def filters(self):
        return {'files_out_of_date': files_out_of_date}
