# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the benchmark scripts share: the controller's environment and a logged, timed command."""

import os
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO_ROOT, ".venv", "bin")


def env(extra=None):
    """The environment `make` gives Ansible (see the Makefile), plus EXTRA."""
    result = dict(os.environ)
    result.update({
        "ANSIBLE_CONFIG": os.path.join(REPO_ROOT, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO_ROOT, ".collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "PATH": BIN + os.pathsep + result.get("PATH", ""),
    })
    result.update(extra or {})
    return result


def run(argv, log, check=True, extra_env=None):
    """Run ARGV in the checkout, append its output to LOG; return (seconds, CompletedProcess)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env(extra_env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    elapsed = time.perf_counter() - start
    with open(log, "a") as handle:
        handle.write("$ %s\n%s\n[%.1f s, rc=%d]\n" % (" ".join(argv), proc.stdout, elapsed, proc.returncode))
    if check and proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        raise SystemExit("%s failed (rc=%d); full log in %s" % (" ".join(argv[:6]), proc.returncode, log))
    return elapsed, proc
