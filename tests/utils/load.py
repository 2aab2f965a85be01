# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's load generator (molecule/fleet/loadgen.py) sending requests through a router from the
controller, as the fleet scenario's tests and bench/fleet_bench.py run it: started, marked where a
rollout starts and ends, stopped, and read back as the report of what the clients saw.

Imported as ``ansible_collections.inferops.serving.tests.utils.load`` (molecule/conftest.py and
bench/bench_common.py put ``.collections`` on the import path).
"""

import json
import os
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADGEN = os.path.join(REPO_ROOT, 'molecule', 'fleet', 'loadgen.py')


class Load(object):
    """loadgen.py sending streaming requests to ROUTER_URL with the clients' KEY until stop(); its
    files (stop file, marks, report) in FOLDER."""

    def __init__(self, folder, router_url, key, concurrency=4, max_seconds=400):
        self.stop_file, self.marks, self.out = (os.path.join(str(folder), name) for name in ('load.stop', 'load.marks', 'load.json'))
        # The key through the environment, as loadgen.py reads it: never on a command line.
        self.process = subprocess.Popen(
            [sys.executable, LOADGEN, '--url', router_url, '--concurrency', str(concurrency), '--max-seconds',
             str(max_seconds), '--stop-file', self.stop_file, '--marks-file', self.marks, '--out', self.out],
            env=dict(os.environ, LOADGEN_API_KEY=key), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def mark(self, name):
        """Split the requests into phases here: `rollout_start`, then `rollout_end`."""
        with open(self.marks, 'a') as handle:
            handle.write('%s %f\n' % (name, time.time()))

    def stop(self):
        """What the clients saw (loadgen.py's report: all, and before, during and after the marks)."""
        open(self.stop_file, 'w').close()
        self.process.wait(timeout=120)
        with open(self.out) as handle:
            return json.load(handle)
