# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two PyPI packages the sglang_router role can run, and the rules their keys follow.

``sglang-router`` (SGLang's router, last release 0.3.2) and ``smg``, its successor, ship the
same Rust router behind the same ``/workers`` API and ``smg_*`` metrics. They differ where the
role must follow them: the Python package that holds ``launch_router`` and ``router_args.py``,
the process title, and what a routed request carries to the worker. sglang-router 0.3.2 sends
the key the worker was registered with; smg passes on the ``Authorization`` header the client
sent (the registered key only when the client sent none), so behind smg the clients' key must
be one the workers accept.

``molecule/resources/lab/build-image.sh`` reads ``ROUTER_PACKAGES`` (each ``verified_version``)
with ``runpy`` to cache the wheels: this file imports nothing from the collection.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

ROUTER_PACKAGES = {
    'sglang-router': {
        'python_package': 'sglang_router',
        'launch_module': 'sglang_router.launch_router',
        'process_title': 'sglang::router',
        'documentation': 'https://docs.sglang.ai/advanced_features/router.html',
        # Every release of sglang-router is a 0.x; smg took over at 1.x.
        'first_major': 0,
        'last_major': 0,
        'verified_version': '0.3.2',
        'forwards_client_key': False,
    },
    'smg': {
        'python_package': 'smg',
        'launch_module': 'smg.launch_router',
        'process_title': 'smg::router',
        'documentation': 'https://github.com/smg-project/smg',
        'first_major': 1,
        'last_major': None,
        'verified_version': '1.13.0',
        'forwards_client_key': True,
    },
}

DEFAULT_PACKAGE = 'sglang-router'

_MAJOR = re.compile(r'^(\d+)\.')


def package_facts(package):
    """The table entry of ``package``; ValueError names the packages there are."""
    if package not in ROUTER_PACKAGES:
        raise ValueError('unknown router package %r; choose one of %s' % (package, ', '.join(sorted(ROUTER_PACKAGES))))
    return ROUTER_PACKAGES[package]


def _family(version):
    """The package whose releases ``version`` belongs to, or None when it names none of them."""
    match = _MAJOR.match(version) if isinstance(version, str) else None
    if not match:
        return None
    major = int(match.group(1))
    for name, facts in sorted(ROUTER_PACKAGES.items()):
        if major >= facts['first_major'] and (facts['last_major'] is None or major <= facts['last_major']):
            return name
    return None


def package_version_errors(package, version):
    """A version of the other package (smg 0.3.2, sglang-router 1.13.0) would fail in pip after the
    venv was made; say what to set instead. The version's form is the version check's job."""
    if package not in ROUTER_PACKAGES or not isinstance(version, str):
        return []
    family = _family(version)
    if family is None or family == package:
        return []
    wanted = ROUTER_PACKAGES[package]['verified_version']
    return ['sglang_router_version %s is a %s release, not one of %s (sglang_router_package): set'
            ' sglang_router_version: "%s" (the %s release this collection is verified with), or'
            ' sglang_router_package: %s to stay on %s.'
            % (version, family, package, wanted, package, family, family)]


def admin_key_errors(package, client_key, admin_key):
    """Who may change the worker list.

    sglang-router 0.3.2 guards ``/workers`` with the clients' key. Behind smg the clients' key is
    also the key the workers accept, handed to every client: ``/workers`` then gets a key of its
    own (``--control-plane-api-keys``), so that a client cannot add or remove workers.
    """
    client_key = client_key or ''
    admin_key = admin_key or ''
    if package not in ROUTER_PACKAGES:
        return []
    if not ROUTER_PACKAGES[package]['forwards_client_key']:
        if admin_key:
            return ['sglang_router_admin_api_key is used with sglang_router_package: smg only (sglang-router'
                    ' guards its /workers API with sglang_router_api_key); leave it empty, or switch to smg.']
        return []
    if client_key and not admin_key:
        return ['sglang_router_package smg passes the clients\' key on to the workers, so sglang_router_api_key'
                ' must be the servers\' key, and the router\'s /workers API needs a key of its own: set'
                ' sglang_router_admin_api_key (vault it; for example `openssl rand -hex 32`).']
    if admin_key and admin_key == client_key:
        return ['sglang_router_admin_api_key must differ from sglang_router_api_key: every client holds the'
                ' latter, and with it could add and remove the router\'s workers.']
    return []


def forwarded_key_errors(router_host, package, client_key, server_key, server_host):
    """Behind smg a routed request reaches the worker with the clients' key: one the server refuses
    fails every request with 401. Checked from the servers' side, which knows their key."""
    if package not in ROUTER_PACKAGES or not ROUTER_PACKAGES[package]['forwards_client_key']:
        return []
    if not client_key or not server_key or client_key == server_key:
        return []
    return ['The router on %s runs smg (sglang_router_package), which passes the key clients send on to the'
            ' servers; its sglang_router_api_key is not the sglang_server_api_key of %s, so every routed'
            ' request would fail with 401. Set sglang_router_api_key on %s to the servers\''
            ' sglang_server_api_key (and guard its /workers API with sglang_router_admin_api_key), or'
            ' sglang_router_package: sglang-router there.' % (router_host, server_host, router_host)]
