# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What this collection treats as a secret.

The input checks of the roles, the server and router argument checks, the masking of module
arguments and the masking of reports all read these lists, so that a name added here is refused
on command lines and hidden in logs and reports everywhere at once. ``scripts/lint_roles.py``
fails when a plugin defines a list of its own.

The launcher the sglang_server and sglang_router roles install (``roles/sglang_launcher/files/``) runs
on the node without this collection; it names the same secrets, and a unit test holds it to
these lists.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

# SGLang server options (argparse dests) that take a secret. They come from the vault-able role
# variables through the 0600 environment file and the launcher: a command line is readable by
# every local user (/proc/PID/cmdline, ps) and would reach the module's log.
SERVER_SECRET_DESTS = ('api_key', 'admin_api_key')
# The same options as flags (--api-key), the spelling users write in sglang_server_args.
SERVER_SECRET_FLAGS = tuple(dest.replace('_', '-') for dest in SERVER_SECRET_DESTS)

# Router options the router would otherwise see on its command line: the key clients and workers
# present, the control plane keys, smg's per-tenant client keys, and the database password and
# URLs (which embed credentials). The first comes from the vault-able sglang_router_api_key, one
# control plane key (smg's /workers) from sglang_router_admin_api_key, both through the launcher;
# the others are refused.
ROUTER_SECRET_DESTS = ('api_key', 'control_plane_api_keys', 'tenant_api_key', 'oracle_password', 'postgres_db_url',
                       'redis_url')

# Environment variables that SGLang reads its API keys from, the Hugging Face token, and the
# router's admin key that the launcher turns into --control-plane-api-keys. The roles write them
# to the environment files from the vault-able variables only, so they are refused in
# sglang_server_env, where they would be neither vaulted nor masked.
SECRET_ENV_NAMES = ('HF_TOKEN', 'HUGGING_FACE_HUB_TOKEN', 'SGLANG_API_KEY', 'SGLANG_ADMIN_API_KEY',
                    'SGLANG_ROUTER_ADMIN_API_KEY')

# Words that make a server flag look secret (dashes for underscores, lower case), so that a key
# put into the arguments by mistake is refused and masked even under a flag this list does not
# name. A bare "token" is not among them: SGLang has some thirty options such as
# --max-total-tokens and --tokenizer-path that carry no secret.
SECRET_FLAG_WORDS = ('api-key', 'apikey', 'hf-token', 'secret', 'password', 'passwd', 'credential')

# Parts of a configuration key (upper case, underscores for dashes) whose value a report shows
# only as set. Broader than the flag words on purpose: a report hides a value that is no secret
# rather than show one that is (SGLANG_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY...).
SECRET_KEY_MARKERS = ('KEY', 'TOKEN', 'SECRET', 'PASSWORD', 'PASSWD', 'CREDENTIAL')


def flag_looks_secret(key):
    """Whether a server argument's name (``api-key``, ``--admin_api_key``, ``api``) may carry a secret."""
    flag = str(key).strip().lstrip('-').lower().replace('_', '-')
    if any(word in flag for word in SECRET_FLAG_WORDS):
        return True
    # argparse would also take an abbreviation such as `--api` for --api-key.
    return any(len(flag) >= 3 and full.startswith(flag) for full in SERVER_SECRET_FLAGS)
