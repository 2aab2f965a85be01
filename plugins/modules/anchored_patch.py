#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
---
module: anchored_patch
short_description: Apply or revert line-anchored edits to installed Python distribution files, provably
version_added: 0.1.0
description:
  - Applies a patch, given as data, to files of installed Python distributions, or reverts it.
  - Before writing anything, every file is checked. The installed version must be the one the
    patch is written for, and every anchor must occur exactly the expected number of times in
    its scope. Otherwise the module fails, names the file, the expected text and what it found,
    and changes nothing.
  - Each file's state is decided against the sha256 in the distribution's C(RECORD)
    (see M(inferops.serving.dist_integrity)). V(pristine) means identical to what pip installed.
    V(patched) means exactly the edits applied to that. V(drifted) is anything else, for
    example a hand edit.
  - With O(state=present), a pristine copy of each file is stored in O(pristine_dir) before
    the file is edited. Files are replaced atomically (temporary file and rename). A rerun
    after an interrupted run patches the files that are still pristine and leaves the patched
    ones alone.
  - With O(state=absent), every file that is not pristine is restored. The pristine copy comes
    from O(pristine_dir), from undoing the edits, or, if neither matches RECORD, from the
    distribution's wheel (C(pip download --no-deps)). A drifted file is restored with a warning
    that names it.
  - Paths matching O(invalidate) (for example a JIT build folder built from the old sources)
    are removed whenever a file is changed, before the file is written. Paths matching O(stale)
    are removed whenever they contain the given text, whether or not a file changes.
options:
  name:
    description: Name of the patch, used in messages.
    type: str
    required: true
  files:
    description: The patch definition, one entry per file.
    type: list
    elements: dict
    required: true
    suboptions:
      distribution:
        description: Distribution that installed the file.
        type: str
        required: true
      version:
        description: Version of the distribution that the edits are written for.
        type: str
        required: true
      path:
        description: Path relative to site-packages, as written in RECORD.
        type: str
        required: true
      edits:
        description:
          - Edits to apply in order. V(find) and V(replace) are whole lines (a block for several lines,
            a final newline is ignored). V(count) (default 1) is how often V(find) must occur.
            V(scope) restricts the edit to the indented block opened by the line that starts with this text.
        type: list
        elements: dict
        required: true
  state:
    description: V(present) applies the patch, V(absent) makes every file identical to what pip installed.
    type: str
    choices: [present, absent]
    default: present
  venv:
    description:
      - Virtual environment that holds the distributions; its C(bin/python) is asked for site-packages
        and runs C(pip download) for the wheel fallback.
      - Exactly one of O(venv), O(python) and O(site_packages) is required.
    type: path
  python:
    description: Python interpreter whose site-packages hold the distributions.
    type: path
  site_packages:
    description: Directory that holds the C(.dist-info) folders. No wheel fallback without an interpreter.
    type: path
  pristine_dir:
    description: Where pristine copies are kept, as C(<dist>-<version>/<path>).
    type: path
    required: true
  invalidate:
    description: Glob patterns of paths to remove whenever a file is changed (derived build artefacts).
    type: list
    elements: str
    default: []
  stale:
    description:
      - Paths (glob in V(path)) to remove whenever they hold a file whose content matches the regex
        V(contains), even when no file changes. Meant for builds made from the other patch state that
        outlived it, for example after an interrupted revert.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Glob of files or folders.
        type: str
        required: true
      contains:
        description: Python regular expression searched in each file (a folder matches if one of its files does).
        type: str
        required: true
  wheel_fallback:
    description: Download the wheel to restore a file when no pristine copy is at hand.
    type: bool
    default: true
  pip_extra_args:
    description: Extra arguments for C(pip download) in the wheel fallback, for example an index URL.
    type: list
    elements: str
    default: []
author:
  - inferops.serving maintainers (!UNKNOWN)
notes:
  - Check mode reports what would change and writes nothing. Restoring from the wheel is only
    attempted outside check mode.
"""

EXAMPLES = r"""
- name: Accept SM120 in FlashInfer's trtllm_comm JIT module
  inferops.serving.anchored_patch:
    name: sm120_comm
    venv: /opt/sglang/venv
    pristine_dir: /var/lib/sglang/pristine
    files:
      - distribution: flashinfer-python
        version: 0.6.3
        path: flashinfer/jit/comm.py
        edits:
          - find: "        supported_major_versions=[9, 10]"
            replace: "        supported_major_versions=[9, 10, 12]"
            scope: "def gen_trtllm_comm_module("
    invalidate:
      - /var/lib/sglang/.cache/flashinfer/0.6.3/*/cached_ops/trtllm_comm
    state: present

- name: Revert it (files byte-identical to RECORD again)
  inferops.serving.anchored_patch:
    name: sm120_comm
    venv: /opt/sglang/venv
    pristine_dir: /var/lib/sglang/pristine
    files: "{{ my_patch_files }}"
    state: absent
    invalidate:
      - /var/lib/sglang/.cache/flashinfer/0.6.3/*/cached_ops/trtllm_comm
    stale:
      - path: /var/lib/sglang/.cache/flashinfer/0.6.3/*/cached_ops/trtllm_comm
        contains: "code=sm_12[0-9]"
"""

RETURN = r"""
files:
  description: One entry per file of the patch, as found before this run.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Path relative to site-packages.
      type: str
    distribution:
      description: Distribution that owns the file.
      type: str
    installed_version:
      description: Installed version of that distribution.
      type: str
    status:
      description: V(pristine), V(patched), V(drifted) or V(missing), before this run.
      type: str
    action:
      description: V(none), V(patch) or V(restore).
      type: str
    pristine_source:
      description: Where the pristine content came from, if it was needed.
      type: str
  sample:
    - path: flashinfer/jit/comm.py
      distribution: flashinfer-python
      installed_version: 0.6.3
      status: pristine
      action: patch
      pristine_source: installed file
patched:
  description: Paths edited in this run.
  returned: always
  type: list
  elements: str
  sample: [flashinfer/jit/comm.py]
restored:
  description: Paths restored to their pristine content in this run.
  returned: always
  type: list
  elements: str
  sample: []
drifted:
  description: Paths that matched neither the pristine nor the patched content (hand edits).
  returned: always
  type: list
  elements: str
  sample: []
invalidated:
  description: Paths removed because of O(invalidate) or O(stale).
  returned: always
  type: list
  elements: str
  sample: [/var/lib/sglang/.cache/flashinfer/0.6.3/120a/cached_ops/trtllm_comm]
problems:
  description: Every reason the patch could not be applied (only when the module fails on anchors or versions).
  returned: failure
  type: list
  elements: str
  sample: ["flashinfer/jit/comm.py (flashinfer-python 0.6.3): expected 1 x '        supported_major_versions=[9, 10]', found 0"]
"""

import glob
import os
import shutil
import tempfile
import zipfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.serving.plugins.module_utils._anchored_patch import (
    AnchoredPatchError,
    execute,
    plan,
    removals,
)
from ansible_collections.inferops.serving.plugins.module_utils._commands import (
    run_c,
    site_packages_dirs,
)
from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (
    venv_python,
)


def interpreter(module):
    return venv_python(module.params["venv"], module.params["python"])


def wheel_fetcher(module):
    """Pristine bytes of a file, read from the distribution's wheel downloaded into a temp dir."""
    python = interpreter(module)

    def fetch(info):
        workdir = tempfile.mkdtemp(prefix="anchored_patch.")
        try:
            cmd = [python, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   "--only-binary", ":all:", "--dest", workdir,
                   "%s==%s" % (info["distribution"], info["installed_version"])] + module.params["pip_extra_args"]
            rc, stdout, stderr = run_c(module, cmd)
            if rc != 0:
                module.fail_json(msg="could not download the wheel of %s %s to restore %s: %s" % (
                    info["distribution"], info["installed_version"], info["path"], stderr.strip()),
                    stdout=stdout, stderr=stderr, rc=rc)
            for wheel in glob.glob(os.path.join(workdir, "*.whl")):
                with zipfile.ZipFile(wheel) as archive:
                    if info["path"] in archive.namelist():
                        return archive.read(info["path"])
            return None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return fetch


def summary(inspected):
    return [dict((key, info[key]) for key in
                 ("path", "distribution", "installed_version", "status", "action", "pristine_source"))
            for info in inspected]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            files=dict(type="list", elements="dict", required=True, options=dict(
                distribution=dict(type="str", required=True),
                version=dict(type="str", required=True),
                path=dict(type="str", required=True),
                edits=dict(type="list", elements="dict", required=True),
            )),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            venv=dict(type="path"),
            python=dict(type="path"),
            site_packages=dict(type="path"),
            pristine_dir=dict(type="path", required=True),
            invalidate=dict(type="list", elements="str", default=[]),
            stale=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="str", required=True),
                contains=dict(type="str", required=True),
            )),
            wheel_fallback=dict(type="bool", default=True),
            pip_extra_args=dict(type="list", elements="str", default=[]),
        ),
        mutually_exclusive=[("venv", "python", "site_packages")],
        required_one_of=[("venv", "python", "site_packages")],
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False, files=[], patched=[], restored=[], drifted=[], invalidated=[])
    try:
        inspected = plan(params["files"], params["state"], site_packages_dirs(module), params["pristine_dir"])
    except AnchoredPatchError as exc:
        module.fail_json(msg="patch %s: %s" % (params["name"], exc), problems=exc.problems, **result)

    result["patched"] = [info["path"] for info in inspected if info["action"] == "patch"]
    result["restored"] = [info["path"] for info in inspected if info["action"] == "restore"]
    result["drifted"] = [info["path"] for info in inspected if info["status"] in ("drifted", "missing")]
    try:
        result["invalidated"] = removals(inspected, params["invalidate"], params["stale"])
    except AnchoredPatchError as exc:
        module.fail_json(msg="patch %s: %s" % (params["name"], exc), **result)
    result["changed"] = bool(result["patched"] or result["restored"] or result["invalidated"])
    result["files"] = summary(inspected)

    if params["state"] == "absent":
        for info in inspected:
            if info["status"] in ("drifted", "missing"):
                module.warn("%s (%s %s) was %s outside this patch (it matched neither RECORD nor the patched "
                            "form); restoring what pip installed" % (
                                info["full_path"], info["distribution"], info["installed_version"],
                                "edited" if info["status"] == "drifted" else "deleted"))

    if not result["changed"] or module.check_mode:
        module.exit_json(**result)

    fetch = wheel_fetcher(module) if params["wheel_fallback"] and not params["site_packages"] else None
    try:
        result["invalidated"] = execute(inspected, params["pristine_dir"], params["invalidate"], fetch,
                                        params["stale"])
    except (AnchoredPatchError, OSError) as exc:
        module.fail_json(msg="patch %s: %s (rerun to finish; files are replaced whole, never half written)" % (
            params["name"], exc), **result)
    result["files"] = summary(inspected)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
