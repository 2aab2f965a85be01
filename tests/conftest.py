"""Make `ansible_collections.inferops.serving` importable from this checkout.

The collection is the repository root; `.collections/ansible_collections/inferops/serving`
links back to it (the Makefile creates the link, this file repairs it when missing).
"""
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS_ROOT = os.path.join(REPO_ROOT, ".collections")
_LINK = os.path.join(COLLECTIONS_ROOT, "ansible_collections", "inferops", "serving")

if not os.path.exists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(os.path.join("..", "..", ".."), _LINK)

if COLLECTIONS_ROOT not in sys.path:
    sys.path.insert(0, COLLECTIONS_ROOT)
