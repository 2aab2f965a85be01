# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run an SGLang server or router with its secrets on its own command line only, masked in what it writes."""

import importlib
import os
import runpy
import sys

from sglang_launch.secret_handover import reexec_without_secrets, write_secret_files
from sglang_launch.secret_masking import MaskingUnavailable, SecretMasking
from sglang_launch.secret_names import (
    ROUTER_ADMIN_KEY_ENTRY,
    ROUTER_SECRET_ENV_FLAGS,
    SECRET_ENV_FILES,
    SECRET_ENV_FLAGS,
    SECRET_FIELDS,
)

# sglang.service does not restart on this status (RestartPreventExitStatus=): a release the
# launcher cannot mask the key on fails the same way on every try. EX_CONFIG of sysexits.h.
EXIT_CANNOT_MASK = 78


def start(target, args):
    """Run ``target`` with ``args`` as its command line: a module as `python -m` runs it, or a
    ``module:function`` as the console script that names it calls it (SGLang 0.5.23 recommends
    `sglang serve`, whose script calls sglang.cli.main:main; `python -m sglang.launch_server` warns)."""
    module, _colon, function = target.partition(":")
    if not function:
        sys.argv = [module] + list(args)
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    # A console script's argv[0] is the script: the top package's name (`sglang`).
    sys.argv = [module.split(".")[0]] + list(args)
    result = getattr(importlib.import_module(module), function)()
    return result if isinstance(result, int) else 0


def run(target, args, secrets=None):
    """Start TARGET; ``secrets`` (flag or path variable -> value) come from the pipe of the first stage."""
    if secrets is None:
        if any(os.environ.get(env_name) for env_name, _flag in SECRET_ENV_FLAGS + ROUTER_SECRET_ENV_FLAGS
               + SECRET_ENV_FILES):
            reexec_without_secrets("run", [target] + list(args))
            return 1  # only reached when execve is replaced (tests)
        for env_name, _flag in SECRET_ENV_FLAGS + ROUTER_SECRET_ENV_FLAGS + SECRET_ENV_FILES:
            os.environ.pop(env_name, None)
        secrets = {}
    write_secret_files(secrets)
    extra = []
    for _env, flag in SECRET_ENV_FLAGS:
        if secrets.get(flag):
            extra += [flag, secrets[flag]]
    for _env, flag in ROUTER_SECRET_ENV_FLAGS:
        if secrets.get(flag):
            extra += [flag, ROUTER_ADMIN_KEY_ENTRY % secrets[flag]]
    # Set before the masking imports SGLang's modules, as `python -m` would have it.
    sys.argv = [target.partition(":")[0]] + list(args) + extra
    try:
        if extra and target.startswith("sglang."):
            SecretMasking(dict((field, secrets.get(flag))
                               for (_env, flag), field in zip(SECRET_ENV_FLAGS, SECRET_FIELDS))).install()
        return start(target, list(args) + extra)
    except MaskingUnavailable as exc:
        print("sglang-launch: refusing to start %s: the API key would appear in clear in what this SGLang "
              "release logs, serves (/server_info) or dumps, because %s. The launcher masks it on the "
              "releases it knows (SGLang 0.5.9 and 0.5.23); update roles/sglang_launcher/files/sglang_launch "
              "for this one." % (target, exc), file=sys.stderr)
        return EXIT_CANNOT_MASK
