# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write GPU and serving metrics for the node exporter's textfile collector; run by a systemd timer.

  python3 gpu_textfile_collector.py --output DIR/inferops_gpu.prom [--nvidia-smi PATH]
      [--kernel-log-command 'journalctl -k -b -o cat --no-pager'] [--history PATH]
      [--health-url URL] [--timeout S] [--expected-gpus N]

Reads nvidia-smi (its query and its -q -x report), the kernel log (NVIDIA Xid lines), the
node's history and the server's /health; the parsing lives in the collection's
module_utils/_gpu_textfile.py and _gpu_health.py (the server's GPU health gate's own
verdict), installed beside this file. The output file is replaced atomically, so the node exporter never
reads half of it. Each source that fails leaves its series out (or reports 0 for
nvidia-smi and /health) instead of failing the whole file. Each command runs within --timeout
(_bounded_run.py): an nvidia-smi stuck on a GPU that fell off the bus, which survives being
killed, is left behind and reported, so that the file still says the GPUs do not answer instead
of keeping the last good readings.
"""

import argparse
import os
import shlex
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

from ansible_collections.inferops.serving.plugins.module_utils._bounded_run import (  # noqa: E402  pylint: disable=wrong-import-position
    CommandTimeout,
    run_answered,
)
from ansible_collections.inferops.serving.plugins.module_utils._gpu_health import (  # noqa: E402  pylint: disable=wrong-import-position
    GpuHealthError,
    assess,
)
from ansible_collections.inferops.serving.plugins.module_utils._gpu_textfile import (  # noqa: E402  pylint: disable=wrong-import-position
    QUERY_FIELDS,
    GpuTextfileError,
    count_xids,
    last_baseline,
    parse_gpu_query,
    render,
)

C_LOCALE = dict(os.environ, LC_ALL="C", LANG="C")
# Seconds between SIGTERM and SIGKILL, and after SIGKILL, for a command past --timeout.
GRACE_S = 2.0


class CommandFailed(Exception):
    """A command that could not start."""


def _run(argv, timeout):
    """(rc, stdout, stderr) of argv run within timeout; CommandTimeout when it did not answer."""
    try:
        return run_answered(argv, timeout, env=C_LOCALE, grace=GRACE_S)
    except OSError as exc:
        raise CommandFailed("cannot run %s: %s" % (argv[0], exc))


def read_gpus(nvidia_smi, timeout):
    """(gpus, error); raises CommandTimeout when nvidia-smi does not answer."""
    argv = [nvidia_smi, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,nounits"]
    try:
        rc, out, err = _run(argv, timeout)
    except CommandFailed as exc:
        return None, str(exc)
    if rc != 0:
        # nvidia-smi prints its complaints on stdout.
        return None, "%s exited %d: %s" % (nvidia_smi, rc, (out + err).strip()[:300])
    try:
        return parse_gpu_query(out), None
    except GpuTextfileError as exc:
        return None, str(exc)


def read_gpu_health(nvidia_smi, kernel_log, expected_gpus, timeout):
    """The GPU health gate's verdict on this node; unhealthy when nvidia-smi -q -x cannot be read."""
    try:
        rc, out, _err = _run([nvidia_smi, "-q", "-x"], timeout)
    except (CommandFailed, CommandTimeout) as exc:
        return {"healthy": False}, str(exc)
    xml_start = out.find("<")
    try:
        return assess(out[xml_start:] if xml_start >= 0 else out, kernel_log=kernel_log,
                      expected_gpu_count=expected_gpus or None,
                      smi_failure="exit code %d" % rc if rc else None), None
    except GpuHealthError as exc:
        return {"healthy": False}, "%s -q -x exited %d: %s" % (nvidia_smi, rc, exc)


def read_kernel_log(command, timeout):
    try:
        return _run(shlex.split(command), timeout)[1]
    except (CommandFailed, CommandTimeout) as exc:
        print("gpu_textfile_collector: cannot read the kernel log: %s" % exc, file=sys.stderr)
        return ""


def read_history(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def probe_health(url, timeout):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def write_atomically(path, text):
    directory = os.path.dirname(path) or "."
    handle, tmp = tempfile.mkstemp(prefix=".inferops_gpu.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--nvidia-smi", default="")
    parser.add_argument("--kernel-log-command", default="")
    parser.add_argument("--history", default="")
    parser.add_argument("--health-url", default="")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--expected-gpus", type=int, default=0)
    args = parser.parse_args(argv)

    gpus = gpu_error = None
    smi_stuck = False
    if args.nvidia_smi:
        try:
            gpus, gpu_error = read_gpus(args.nvidia_smi, args.timeout)
        except CommandTimeout as exc:
            gpu_error, smi_stuck = str(exc), True
        if gpu_error:
            print("gpu_textfile_collector: %s" % gpu_error, file=sys.stderr)
    kernel_log = read_kernel_log(args.kernel_log_command, args.timeout) if args.kernel_log_command else None
    xids = count_xids(kernel_log) if kernel_log is not None else None
    gpu_health = None
    if args.nvidia_smi:
        if smi_stuck:
            # The driver that did not answer the query would not answer -q -x either (said above).
            gpu_health, health_error = {"healthy": False}, None
        else:
            gpu_health, health_error = read_gpu_health(args.nvidia_smi, kernel_log, args.expected_gpus, args.timeout)
        if health_error:
            print("gpu_textfile_collector: %s" % health_error, file=sys.stderr)
    baseline = last_baseline(read_history(args.history)) if args.history else None
    health = probe_health(args.health_url, args.timeout) if args.health_url else None
    write_atomically(args.output, render(gpus=gpus, gpu_error=gpu_error, xids=xids, health_up=health,
                                         baseline=baseline, now=round(time.time(), 3), gpu_health=gpu_health))
    return 0


if __name__ == "__main__":
    sys.exit(main())
