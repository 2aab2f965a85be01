# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make `ansible_collections.inferops.serving` importable by every scenario's tests, as tests/conftest.py
does for the unit tests: the shared test helpers live in tests/utils/."""
import os
import sys

COLLECTIONS_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".collections")

if COLLECTIONS_ROOT not in sys.path:
    sys.path.insert(0, COLLECTIONS_ROOT)
