# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which key a worker receives when clients and servers hold different keys, measured on the real
routers: each pinned wheel installed into a venv of its own and started on loopback in front of a
stand-in SGLang worker that records the ``Authorization`` header of every request.

The serving role refuses a router key that differs from the servers' behind smg
(``forwarded_key_errors``) and allows it behind sglang-router; these tests hold that rule to what
each router does.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ROUTER_WHEELHOUSE, ROUTER_WHEELS, fetch_router_wheel

from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_packages import forwarded_key_errors

# The code under test runs on the node or is a third-party binary, not ansible-core: the
# ansible-core matrix (make core-matrix) leaves these tests out.
pytestmark = pytest.mark.no_ansible_core

CLIENT_KEY = 'key-the-clients-hold'
SERVER_KEY = 'key-the-servers-hold'
ADMIN_KEY = 'key-of-the-workers-api'
MODULES = {'sglang-router': 'sglang_router.launch_router', 'smg': 'smg.launch_router'}


def router_venv(package):
    """A venv with the pinned wheel and its dependencies from PyPI, kept beside the wheelhouse so
    the runs of one machine install it once (made aside, then renamed into place)."""
    version = ROUTER_WHEELS[package][0]
    venv = os.path.join(ROUTER_WHEELHOUSE, 'venvs', '%s-%s' % (package, version))
    python = os.path.join(venv, 'bin', 'python')
    if os.path.exists(python):
        return python
    wheel = fetch_router_wheel(package)
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    staging = tempfile.mkdtemp(dir=os.path.dirname(venv), prefix='.staging-')
    try:
        subprocess.run([sys.executable, '-m', 'venv', staging], check=True)
        proc = subprocess.run([os.path.join(staging, 'bin', 'python'), '-m', 'pip', 'install', '-q', wheel],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        if proc.returncode != 0:
            pytest.skip('could not install %s %s with its dependencies from PyPI: %s'
                        % (package, version, proc.stdout.strip()[-300:]))
        try:
            os.rename(staging, venv)
        except OSError:
            pass  # another run put its venv there first: the same wheel, use that one
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return python


class Worker(BaseHTTPRequestHandler):
    """Answers what a router asks of an SGLang worker before it lists it, and a chat completion."""
    protocol_version = 'HTTP/1.1'
    seen = []

    def log_message(self, *args):
        pass

    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.seen.append((self.path, self.headers.get('Authorization')))
        if self.path.startswith('/v1/models'):
            self._reply({'object': 'list', 'data': [{'id': 'm', 'object': 'model', 'owned_by': 'sglang',
                                                     'max_model_len': 4096}]})
        elif 'server_info' in self.path:
            self._reply({'model_path': 'm', 'served_model_name': 'm', 'tp_size': 1, 'dp_size': 1})
        elif 'model_info' in self.path:
            self._reply({'model_path': 'm', 'is_generation': True})
        else:
            self._reply({})

    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        self.seen.append((self.path, self.headers.get('Authorization')))
        self._reply({'id': 'c', 'object': 'chat.completion', 'created': 0, 'model': 'm',
                     'choices': [{'index': 0, 'message': {'role': 'assistant', 'content': 'ok'}, 'finish_reason': 'stop'}],
                     'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2}})


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def call(port, method, path, key, body=None):
    headers = {'Content-Type': 'application/json'}
    if key:
        headers['Authorization'] = 'Bearer ' + key
    request = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return None, str(error)


def until(what, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def worker():
    Worker.seen = []
    server = ThreadingHTTPServer(('127.0.0.1', free_port()), Worker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize('package, key_at_the_worker', [('sglang-router', SERVER_KEY), ('smg', CLIENT_KEY)])
def test_the_key_a_routed_request_brings_to_the_worker(worker, package, key_at_the_worker):
    python = router_venv(package)
    port = free_port()
    argv = [python, '-m', MODULES[package], '--host', '127.0.0.1', '--port', str(port), '--prometheus-host',
            '127.0.0.1', '--prometheus-port', str(free_port()), '--health-check-interval-secs', '2',
            '--api-key', CLIENT_KEY]
    # smg guards its worker API with a control-plane key; sglang-router with the client key.
    workers_key = CLIENT_KEY
    if package == 'smg':
        argv += ['--control-plane-api-keys', 'inferops-serving:inferops.serving:admin:' + ADMIN_KEY]
        workers_key = ADMIN_KEY
    router = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    try:
        assert until(lambda: call(port, 'GET', '/liveness', None)[0] == 200), 'the router did not start'
        worker_url = 'http://127.0.0.1:%d' % worker.server_address[1]
        status, body = call(port, 'POST', '/workers', workers_key, {'url': worker_url, 'api_key': SERVER_KEY})
        assert status == 202, body
        assert until(lambda: '"is_healthy":true' in call(port, 'GET', '/workers', workers_key)[1].replace(' ', '')), \
            call(port, 'GET', '/workers', workers_key)
        Worker.seen = []
        status, body = call(port, 'POST', '/v1/chat/completions', CLIENT_KEY,
                            {'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 1})
        assert status == 200, body
        routed = [key for path, key in Worker.seen if path == '/v1/chat/completions']
        assert routed == ['Bearer ' + key_at_the_worker]
        # The router's own probes carry the key the worker was registered with.
        assert until(lambda: any(seen[0] == '/health' for seen in Worker.seen), 15)
        assert set(key for path, key in Worker.seen if path == '/health') == {'Bearer ' + SERVER_KEY}
    finally:
        router.kill()
        router.wait()
    # The serving role's check follows what the router does: a refusal exactly where the worker
    # would see the clients' key and answer 401.
    errors = forwarded_key_errors('router-1', package, CLIENT_KEY, SERVER_KEY, 'gpu-node')
    assert bool(errors) == (key_at_the_worker == CLIENT_KEY)
