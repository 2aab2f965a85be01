# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the benchmark scripts share: the controller's environment, a logged, timed command, and the
reading of a playbook's result (PlaybookRun, which the tests use too)."""

import os
import resource
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO_ROOT, ".venv", "bin")
# The collection and its test modules import as ansible_collections.inferops.serving.*, from where
# Ansible finds the collection too (the tests' conftest.py adds the same folder).
sys.path.insert(0, os.path.join(REPO_ROOT, ".collections"))

# The tests' helpers are here for the bench scripts: they find the lab containers and their keys, load the
# router and read their runs with them.
from ansible_collections.inferops.serving.tests.utils.lab import container_address, inventory_vars  # pylint: disable=unused-import
from ansible_collections.inferops.serving.tests.utils.load import Load  # pylint: disable=unused-import
from ansible_collections.inferops.serving.tests.utils.playbook import JSON_OUTPUT, PlaybookRun  # pylint: disable=unused-import


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
    """Run ARGV in the checkout, append its output to LOG; return (seconds, CompletedProcess).
    ansible-playbook prints its result as JSON, for PlaybookRun; other commands run as before."""
    if os.path.basename(argv[0]) == "ansible-playbook":
        extra_env = dict(JSON_OUTPUT, **(extra_env or {}))
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


def container_cpu_counter(name):
    """Where the cgroup of container NAME counts its CPU time: (file, key or None, seconds per unit),
    or None where that is unreadable."""
    proc = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", name], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
    cid = proc.stdout.strip()
    if proc.returncode != 0 or not cid:
        return None
    # cgroup v1 (cgroupfs driver), then cgroup v2 under the systemd or the cgroupfs driver.
    for counter in (("/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage" % cid, None, 1e-9),
                    ("/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat" % cid, "usage_usec", 1e-6),
                    ("/sys/fs/cgroup/docker/%s/cpu.stat" % cid, "usage_usec", 1e-6)):
        if os.path.exists(counter[0]):
            return counter
    return None


def read_cpu_seconds(counter):
    """CPU seconds so far from a counter of container_cpu_counter()."""
    path, key, unit = counter
    with open(path) as handle:
        if key is None:
            return int(handle.read()) * unit
        for line in handle:
            name, _sep, value = line.partition(" ")
            if name == key:
                return int(value) * unit
    raise ValueError("%s has no %s line" % (path, key))


class CpuMeter(object):
    """CPU seconds used while it is open: by the controller's commands (run() children) and by the
    lab containers, which share the controller's cores on this machine. The containers' counters
    are found before it opens, so that finding them is not measured."""

    def __init__(self, containers):
        self._counters = [container_cpu_counter(name) for name in containers]
        self.controller = self.nodes = None

    @staticmethod
    def _children():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def _nodes(self):
        if None in self._counters:
            return None
        return sum(read_cpu_seconds(counter) for counter in self._counters)

    def __enter__(self):
        self._start = (self._children(), self._nodes())
        return self

    def __exit__(self, *exc):
        self.controller = self._children() - self._start[0]
        end = self._nodes()
        self.nodes = None if end is None else end - self._start[1]
        return False
