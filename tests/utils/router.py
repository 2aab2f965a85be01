# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router's HTTP API as the tests call it from the controller (SGLang's router and smg answer alike).

Imported as ``ansible_collections.inferops.serving.tests.utils.router`` (molecule/conftest.py puts
``.collections`` on the import path).
"""

import json
import urllib.error
import urllib.request


def router_api(router_url, path, key, body=None, timeout=30):
    """What the router at ROUTER_URL answers on PATH (a POST of BODY when given) with KEY, as JSON."""
    request = urllib.request.Request(router_url + path, headers={'Authorization': 'Bearer ' + key, 'Content-Type': 'application/json'},
                                     data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def router_workers(router_url, key):
    """The workers the router lists with KEY (its client key, or smg's admin key), or None while it
    does not answer: a router that restarts is a state the tests wait through."""
    try:
        return router_api(router_url, '/workers', key, timeout=5)['workers']
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None


def healthy_worker_urls(router_url, key):
    """The URLs of the workers the router calls healthy, sorted ([] while it does not answer)."""
    return sorted(worker['url'] for worker in router_workers(router_url, key) or [] if worker['is_healthy'])
