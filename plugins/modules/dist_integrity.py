#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
---
module: dist_integrity
short_description: Report which files of an installed Python distribution differ from what pip installed
version_added: 0.1.0
description:
  - Reads C(<name>-<version>.dist-info/RECORD) of an installed distribution and compares every
    listed file (or the files in O(paths)) with the hash pip recorded when it installed the wheel.
  - Finds hand edits, local patches and half-finished upgrades without reinstalling anything.
  - Read-only; never reports C(changed).
options:
  name:
    description:
      - Distribution name as on PyPI. C(flashinfer-python), C(flashinfer_python) and
        C(FlashInfer.Python) are the same name.
    type: str
    required: true
    aliases: [distribution]
  venv:
    description:
      - Virtual environment whose interpreter C(bin/python) is asked for its site-packages.
      - Exactly one of O(venv), O(python) and O(site_packages) is required.
    type: path
  python:
    description:
      - Python interpreter whose site-packages (purelib and platlib) hold the distribution.
    type: path
  site_packages:
    description:
      - Directory that holds the C(.dist-info) folder, when no interpreter should be run.
    type: path
  paths:
    description:
      - Check only these paths, relative to site-packages, exactly as RECORD writes them.
      - A path that RECORD does not list is an error.
    type: list
    elements: str
  fail_on_modified:
    description:
      - Fail when a file is modified or missing, instead of only reporting it.
    type: bool
    default: false
author:
  - inferops.serving maintainers (!UNKNOWN)
notes:
  - Files without a hash in RECORD (RECORD itself, byte-code written after install) cannot be
    proven and are counted in RV(unhashed).
"""

EXAMPLES = r"""
- name: Prove that sglang in the service venv is exactly what pip installed
  inferops.serving.dist_integrity:
    name: sglang
    venv: /opt/sglang/venv
  register: __sglang_integrity

- name: Fail when someone edited FlashInfer's JIT definitions by hand
  inferops.serving.dist_integrity:
    name: flashinfer-python
    venv: /opt/sglang/venv
    paths:
      - flashinfer/jit/comm.py
    fail_on_modified: true
"""

RETURN = r"""
installed:
  description: Whether the distribution is installed; all other values are empty when it is not.
  returned: always
  type: bool
  sample: true
name:
  description: Normalised distribution name.
  returned: always
  type: str
  sample: flashinfer-python
version:
  description: Installed version, from the dist-info folder name.
  returned: always
  type: str
  sample: 0.6.3
site_packages:
  description: Directory that holds the distribution.
  returned: always
  type: str
  sample: /opt/sglang/venv/lib/python3.11/site-packages
dist_info:
  description: Path of the C(.dist-info) folder whose RECORD was read.
  returned: always
  type: str
  sample: /opt/sglang/venv/lib/python3.11/site-packages/flashinfer_python-0.6.3.dist-info
modified:
  description: RECORD paths whose content differs from the recorded hash or size.
  returned: always
  type: list
  elements: str
  sample: [flashinfer/jit/comm.py]
missing:
  description: RECORD paths that are no longer on disk.
  returned: always
  type: list
  elements: str
  sample: []
checked:
  description: Number of files compared with their recorded hash.
  returned: always
  type: int
  sample: 2101
unhashed:
  description: Number of RECORD entries without a hash among the selected ones (not provable).
  returned: always
  type: int
  sample: 1
pristine:
  description: True when the distribution is installed and no checked file is modified or missing.
  returned: always
  type: bool
  sample: false
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.serving.plugins.module_utils._commands import (
    site_packages_dirs,
)
from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (
    DistRecordError,
    find_distribution,
    load_record,
    normalize_name,
    verify,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True, aliases=["distribution"]),
            venv=dict(type="path"),
            python=dict(type="path"),
            site_packages=dict(type="path"),
            paths=dict(type="list", elements="str"),
            fail_on_modified=dict(type="bool", default=False),
        ),
        mutually_exclusive=[("venv", "python", "site_packages")],
        required_one_of=[("venv", "python", "site_packages")],
        supports_check_mode=True,
    )
    name = module.params["name"]
    result = dict(changed=False, installed=False, name=normalize_name(name), version="", site_packages="",
                  dist_info="", modified=[], missing=[], checked=0, unhashed=0, pristine=False)
    try:
        dist = find_distribution(site_packages_dirs(module), name)
        if dist is None:
            module.exit_json(**result)
        report = verify(dist["site_packages"], load_record(dist), module.params["paths"])
    except DistRecordError as exc:
        module.fail_json(msg=str(exc), **result)
    result.update(installed=True, version=dist["version"], site_packages=dist["site_packages"],
                  dist_info=dist["dist_info"], **report)
    result["pristine"] = not report["modified"] and not report["missing"]
    if module.params["fail_on_modified"] and not result["pristine"]:
        module.fail_json(msg="%s %s differs from its RECORD: modified %s, missing %s" % (
            name, dist["version"], ", ".join(report["modified"]) or "none",
            ", ".join(report["missing"]) or "none"), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
