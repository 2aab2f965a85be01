# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module's JSON result as the controller shows it, for the tests that run a module on its own
(run_in_process() runs one in the test's own process, tests/unit/plugins/modules/conftest.py in a
process of its own).

Up to ansible-core 2.21 a module takes its no_log values out of its result itself. From 2.22 the
module lists them in one field of its result instead, and the controller takes the field out and masks
those values in everything it shows or logs. A test that checks that a key stays out of what
a user sees reads the result through as_shown(), which masks as the controller of 2.22 does: on every
release, a key the module did not hide or list is still there for the test to find.

Imported as ``ansible_collections.inferops.serving.tests.utils.module_result``.
"""

import json

import pytest

from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.testing import patch_module_args

SECRETS_TO_MASK = '_ansible_new_secrets'
MASK = '$REDACTED$'


def as_shown(result):
    """``result`` (a module's parsed JSON) with every value the module listed for masking masked, the
    list itself left out."""
    shown = dict(result)
    to_mask = shown.pop(SECRETS_TO_MASK, None) or []
    text = json.dumps(shown)
    # Longest first: a secret that contains another is masked whole.
    for secret in sorted((value.strip() for value in to_mask), key=len, reverse=True):
        if secret:
            text = text.replace(json.dumps(secret)[1:-1], MASK)
    return json.loads(text)


def run_in_process(main, args, capsys):
    """A module's ``main`` run in this process with ``args``, as Ansible runs it in a process of its own:
    its result as the controller shows it (``capsys``: pytest's capture of the printed result)."""
    # pylint: disable=protected-access
    # Ansible keeps a module's warnings in module-wide globals, one module per process in a real run: a
    # run in this process would otherwise return the warnings of earlier runs too.
    module_warnings._global_warnings.clear()
    module_warnings._global_deprecations.clear()
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            main()
    return as_shown(json.loads(capsys.readouterr().out))
