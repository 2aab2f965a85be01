# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reverting the SM120 allreduce-fusion patch versus reinstalling the two packages it edits.

In one run, on the same venv, with the real sglang and flashinfer-python wheels:
  * revert: the role's way back, i.e. the anchored_patch module with state=absent run by
    ansible-playbook (interpreter start, RECORD proof of every touched file, restore from
    the pristine store, trtllm_comm JIT folder removal). The in-process engine time is
    reported as well;
  * reinstall: `pip install --force-reinstall --no-deps sglang==V flashinfer-python==V`
    from wheels already on disk (no download is counted, so this is pip's best case).
Each is repeated (default 3) and the medians are compared. Both end with files proven
identical to RECORD, otherwise the run fails.

Usage: .venv/bin/python bench/revert_patch.py [--repeat N] [--venv PATH] [--wheels DIR] [--json FILE]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO_ROOT, ".collections")
PATCH_VARS = os.path.join(REPO_ROOT, "roles", "sglang", "vars", "patches", "sm120_allreduce_fusion.yml")
_LINK = os.path.join(COLLECTIONS, "ansible_collections", "inferops", "serving")
if not os.path.exists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(os.path.join("..", "..", ".."), _LINK)
sys.path.insert(0, COLLECTIONS)

# pylint: disable=wrong-import-position
from ansible_collections.inferops.serving.plugins.module_utils._anchored_patch import execute, plan  # noqa: E402
from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (  # noqa: E402
    find_distribution,
    load_record,
    verify,
)

PLAYBOOK = """---
- name: Revert the SM120 allreduce-fusion patch
  hosts: localhost
  gather_facts: false
  vars_files:
    - {patch_vars}
  tasks:
    - name: Patch absent
      inferops.serving.anchored_patch:
        name: "{{{{ _sglang_sm120_allreduce_fusion_patch.name }}}}"
        files: "{{{{ _sglang_sm120_allreduce_fusion_patch.files }}}}"
        state: absent
        venv: {venv}
        pristine_dir: {pristine}
        invalidate:
          - {jit_glob}
        wheel_fallback: false
"""


def sh(argv, **kwargs):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False, **kwargs)
    if proc.returncode != 0:
        sys.exit("%s failed (rc=%d):\n%s" % (" ".join(argv), proc.returncode, proc.stdout[-4000:]))
    return proc.stdout


def timed(func):
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def site_packages(venv):
    out = sh([os.path.join(venv, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    return out.strip().splitlines()[-1]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--venv", help="venv that already holds the two packages (default: a new one)")
    parser.add_argument("--wheels", help="folder with the two wheels (default: pip download into a temp folder)")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)

    with open(PATCH_VARS) as handle:
        patch = yaml.safe_load(handle)["_sglang_sm120_allreduce_fusion_patch"]
    versions = dict((f["distribution"], f["version"]) for f in patch["files"])
    pins = ["%s==%s" % item for item in sorted(versions.items())]

    workdir = tempfile.mkdtemp(prefix="revert-bench.")
    try:
        wheels = args.wheels or os.path.join(workdir, "wheels")
        if not args.wheels:
            sh([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                "-d", wheels] + pins)
        venv = args.venv or os.path.join(workdir, "venv")
        if not args.venv:
            sh([sys.executable, "-m", "venv", venv])
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
               "--no-deps", "--no-index", "--find-links", wheels]
        sh(pip + pins)
        site = site_packages(venv)
        pristine = os.path.join(workdir, "pristine")
        jit_root = os.path.join(workdir, "flashinfer-cache", versions["flashinfer-python"])
        jit_glob = os.path.join(jit_root, "*", "cached_ops", "trtllm_comm")
        playbook = os.path.join(workdir, "revert.yml")
        with open(playbook, "w") as handle:
            handle.write(PLAYBOOK.format(patch_vars=PATCH_VARS, venv=venv, pristine=pristine, jit_glob=jit_glob))
        ansible_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"),
                           ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
        playbook_cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                        "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable, playbook]

        def patch_on():
            execute(plan(patch["files"], "present", [site], pristine), pristine)
            build = os.path.join(jit_root, "120a", "cached_ops", "trtllm_comm")
            os.makedirs(build, exist_ok=True)
            with open(os.path.join(build, "build.ninja"), "w") as handle:
                handle.write("cuda_cflags = -gencode=arch=compute_120a,code=sm_120a\n")

        def assert_pristine(after):
            for dist_name in versions:
                dist = find_distribution([site], dist_name)
                paths = [f["path"] for f in patch["files"] if f["distribution"] == dist_name]
                report = verify(dist["site_packages"], load_record(dist), paths)
                if report["modified"] or report["missing"]:
                    sys.exit("after %s, %s differs from RECORD: %s" % (after, dist_name, report))

        engine, module, reinstall = [], [], []
        for _round in range(args.repeat):
            patch_on()
            engine.append(timed(lambda: execute(plan(patch["files"], "absent", [site], pristine), pristine,
                                                [jit_glob])))
            assert_pristine("the in-process revert")
            patch_on()
            module.append(timed(lambda: sh(playbook_cmd, env=ansible_env)))
            assert_pristine("the revert play")
            if os.path.exists(os.path.join(jit_root, "120a", "cached_ops", "trtllm_comm")):
                sys.exit("the revert play left the trtllm_comm JIT folder")
            patch_on()
            reinstall.append(timed(lambda: sh(pip + ["--force-reinstall"] + pins)))
            assert_pristine("pip --force-reinstall")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    result = {
        "repeat": args.repeat,
        "revert_play_seconds": round(statistics.median(module), 3),
        "revert_engine_seconds": round(statistics.median(engine), 4),
        "reinstall_seconds": round(statistics.median(reinstall), 3),
    }
    result["ratio"] = round(result["reinstall_seconds"] / result["revert_play_seconds"], 1)
    result["engine_ratio"] = round(result["reinstall_seconds"] / result["revert_engine_seconds"], 1)
    result["rows"] = [
        ["pip --force-reinstall --no-deps (sglang, flashinfer-python) / SM120 patch revert play",
         "%sx" % result["ratio"],
         "%.2f s vs %.2f s, median of %d, both proven against RECORD; wheels on disk"
         % (result["reinstall_seconds"], result["revert_play_seconds"], args.repeat)],
        ["... / revert engine alone (no ansible-playbook start)", "%sx" % result["engine_ratio"],
         "%.2f s vs %.3f s" % (result["reinstall_seconds"], result["revert_engine_seconds"])],
    ]
    for name, value, note in result["rows"]:
        print("%-90s %10s  %s" % (name, value, note))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
