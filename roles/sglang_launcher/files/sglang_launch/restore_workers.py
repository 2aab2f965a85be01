# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Add the recorded workers again to a router that restarted (sglang-router.service's ExecStartPost)."""

import json
import os
import sys
import time
import urllib.error
import urllib.request

from sglang_launch.secret_handover import reexec_without_secrets
from sglang_launch.secret_names import ROUTER_SECRET_ENV_FLAGS, SECRET_ENV_FLAGS


def _router_call(router_url, method, path, api_key, body=None):
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(router_url.rstrip("/") + path, data=data, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read()


def _normalized(url):
    # smg refuses a scheme in capitals and keeps "http://w:8000/" apart from "http://w:8000".
    scheme, _sep, rest = url.partition("://")
    host, _sep, path = rest.partition("/")
    path = path.strip("/")
    return "%s://%s%s" % (scheme.lower(), host.lower(), ("/" + path) if path else "")


def restore_workers(router_url, members_file, main_pid, secrets=None, timeout=120.0, interval=1.0):
    """A restarted router has forgotten the workers added through its API: add those the membership
    file records (the serving role keeps it) and the router does not list. The router adds each
    in the background once the worker answers. Never fails the router's start: a worker that is
    down now is logged, and the next deploy, or the next start, adds it. smg answers 409 for a
    worker it lists or is adding already (sglang-router 0.3.2: 202): both mean it has it."""
    if secrets is None:
        if any(os.environ.get(env_name) for env_name, _flag in SECRET_ENV_FLAGS + ROUTER_SECRET_ENV_FLAGS):
            reexec_without_secrets("restore-workers", [router_url, members_file, str(main_pid)])
            return 1  # only reached when execve is replaced (tests)
        secrets = {}
    # With an admin key (smg) /workers refuses the clients' key.
    api_key = secrets.get("--control-plane-api-keys") or secrets.get("--api-key")
    try:
        with open(members_file) as handle:
            members = (json.load(handle).get("workers") or {})
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as exc:
        print("sglang-launch: cannot read %s: %s" % (members_file, exc), file=sys.stderr)
        return 0
    if not members:
        return 0
    deadline = time.time() + timeout
    while True:
        try:
            _status, text = _router_call(router_url, "GET", "/workers", api_key)
            listed = set(_normalized(worker["url"]) for worker in json.loads(text.decode("utf-8"))["workers"])
            break
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            if not os.path.exists("/proc/%d" % main_pid) or time.time() >= deadline:
                print("sglang-launch: the router at %s did not answer GET /workers; no worker restored" % router_url,
                      file=sys.stderr)
                return 0
            time.sleep(interval)
    for url in sorted(members):
        if _normalized(url) in listed:
            continue
        body = {"url": _normalized(url)}
        if (members[url] or {}).get("api_key"):
            body["api_key"] = members[url]["api_key"]
        try:
            status, _text = _router_call(router_url, "POST", "/workers", api_key, body)
            print("sglang-launch: asked the router to add %s again (%d)" % (url, status))
        except urllib.error.HTTPError as exc:
            if exc.code == 409:
                print("sglang-launch: the router has %s already (409)" % url)
            else:
                print("sglang-launch: the router refused to add %s: %s" % (url, exc), file=sys.stderr)
        except (urllib.error.URLError, OSError) as exc:
            print("sglang-launch: could not ask the router to add %s: %s" % (url, exc), file=sys.stderr)
    return 0
