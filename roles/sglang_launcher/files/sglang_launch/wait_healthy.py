# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until the server answers, while it runs (sglang.service's ExecStartPost)."""

import os
import sys
import time
import urllib.error
import urllib.request


def wait_healthy(url, main_pid, interval=2.0):
    # systemd's TimeoutStartSec bounds this loop; the unit stays "activating" until it returns.
    # systemd does not end ExecStartPost when the main process dies, so watch it here.
    while True:
        if not os.path.exists("/proc/%d" % main_pid):
            print("sglang-launch: the server process %d exited before it answered %s" % (main_pid, url),
                  file=sys.stderr)
            return 1
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                if response.status == 200:
                    return 0
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(interval)
