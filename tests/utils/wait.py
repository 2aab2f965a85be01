# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for a lab node to reach a state: a scrape, an alert, a router taking its workers back.

Imported as ``ansible_collections.inferops.serving.tests.utils.wait`` (molecule/conftest.py puts
``.collections`` on the import path).
"""

import time


def until(what, check, wait_s=90, interval=2):
    """CHECK's first true answer, asked every INTERVAL seconds; after WAIT_S seconds without one,
    fails saying WHAT did not come."""
    deadline = time.monotonic() + wait_s
    while True:
        answer = check()
        if answer or time.monotonic() > deadline:
            assert answer, 'after %d s: %s' % (wait_s, what)
            return answer
        time.sleep(interval)
