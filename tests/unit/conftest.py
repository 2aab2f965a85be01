"""What several test folders share: a stand-in for the SGLang router's worker API, and the real
router wheels from PyPI."""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# The router wheels the sglang_router role installs, by package: version and the sha256 of the
# manylinux x86_64 wheel on PyPI. Their code is read from the wheel itself, downloaded once into
# ROUTER_WHEELHOUSE (kept between runs), never copied into this repository.
ROUTER_WHEELS = {
    'sglang-router': ('0.3.2', 'ba5a24951e5e0357fe390782fcd1abd861448a87216832dbf2e501a1dd1548eb'),
    'smg': ('1.13.0', 'cfae8171dac68a74b4822263b1864fa79952992ee472a25ba7266ccd200399b4'),
}
ROUTER_WHEELHOUSE = os.environ.get('INFEROPS_TEST_WHEELHOUSE') or os.path.join(tempfile.gettempdir(), 'wheels')


def _wheel_path(package, version):
    prefix = '%s-%s-' % (package.replace('-', '_'), version)
    if os.path.isdir(ROUTER_WHEELHOUSE):
        for name in sorted(os.listdir(ROUTER_WHEELHOUSE)):
            if name.startswith(prefix) and name.endswith('.whl') and 'x86_64' in name:
                return os.path.join(ROUTER_WHEELHOUSE, name)
    return None


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def fetch_router_wheel(package):
    """The path of the pinned wheel of ``package``, downloaded with pip when the wheelhouse lacks it."""
    version, sha256 = ROUTER_WHEELS[package]
    path = _wheel_path(package, version)
    if path is None:
        command = [sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:',
                   '--platform', 'manylinux_2_17_x86_64', '--python-version', '3.11', '-d', ROUTER_WHEELHOUSE,
                   '%s==%s' % (package, version)]
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              check=False)
        path = _wheel_path(package, version)
        if proc.returncode != 0 or path is None:
            pytest.skip('the %s %s wheel is not in %s and pip could not fetch it (%s); run: %s -m pip download'
                        ' --no-deps -d %s %s==%s' % (package, version, ROUTER_WHEELHOUSE, proc.stdout.strip()[-200:],
                                                     sys.executable, ROUTER_WHEELHOUSE, package, version))
    assert _sha256(path) == sha256, '%s is not the %s %s wheel PyPI publishes' % (path, package, version)
    return path


@pytest.fixture(scope='session')
def router_wheel_file():
    """Callable: ``(package, path inside the wheel)`` -> that file's text, from the real wheel."""
    cache = {}

    def read(package, member):
        if (package, member) not in cache:
            with zipfile.ZipFile(fetch_router_wheel(package)) as wheel:
                cache[(package, member)] = wheel.read(member).decode('utf-8')
        return cache[(package, member)]
    return read


class FakeRouter:
    """The /workers API as the module and the launcher use it: GET /workers, POST /workers (202, the
    worker listed healthy at once), DELETE /workers/{id}; every request must carry the router's key.

    ``sglang-router`` answers as 0.3.2 does. ``smg`` answers as smg 1.13.0 does (tests/unit/plugins/
    module_utils/fixtures/smg): 409 for a URL it lists or is adding, 400 for a scheme in capitals,
    a removed worker listed as draining for ``drain_polls`` more lists, and entries with status and
    labels. The add of an ``unreachable`` URL is accepted but never ends, as for a worker that does not
    answer: the router does not list it."""

    def __init__(self, api_key, flavour='sglang-router', drain_polls=2):
        self.api_key = api_key
        self.flavour = flavour
        self.drain_polls = drain_polls
        self.workers = []
        self.unreachable = set()
        self.adding = set()
        self.draining = {}
        self.requests = []
        router = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self):
                if self.headers.get('Authorization') != 'Bearer %s' % router.api_key:
                    self._reply(401, {'error': 'unauthorized'})
                    return False
                return True

            def do_GET(self):
                if self._authorized() and self.path == '/workers':
                    router.end_drains()
                    self._reply(200, {'workers': router.workers, 'total': len(router.workers)})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                router.requests.append(('POST', self.path, body))
                if self._authorized():
                    self._reply(*router.add(body['url']))

            def do_DELETE(self):
                router.requests.append(('DELETE', self.path, None))
                if self._authorized():
                    router.remove(self.path.rsplit('/', 1)[-1])
                    self._reply(202, {})

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def entry(self, url, worker_id=None):
        entry = {'id': worker_id or str(uuid.uuid4()), 'url': url, 'model_id': 'm', 'is_healthy': True, 'load': 0}
        if self.flavour == 'smg':
            entry.update(status='ready', labels={'served_model_name': 'm'})
        else:
            entry.update(metadata={'served_model_name': 'm'})
        return entry

    def add(self, url):
        listed = [w for w in self.workers if w['url'] == url]
        if self.flavour == 'smg':
            if not url.startswith(('http://', 'https://')):
                return 400, {'error': "Invalid value for field 'worker_url': %s - URL must start with a lowercase"
                                      " http://, https://, grpc://, grpcs://, or ipc:// scheme" % url,
                             'code': 'BAD_REQUEST'}
            if listed:
                return 409, {'error': "Worker already exists at URL '%s' with ID %s. Use PUT /workers/%s to replace"
                                      % (url, listed[0]['id'], listed[0]['id']), 'code': 'WORKER_ALREADY_EXISTS'}
            if url in self.adding:
                return 409, {'error': "Worker creation already in progress for URL '%s' with ID %s. Poll GET"
                                      " /workers/%s." % (url, '01a2331e-d20c-7292-88f5-87881ce043eb',
                                                         '01a2331e-d20c-7292-88f5-87881ce043eb'),
                             'code': 'WORKER_CREATE_IN_PROGRESS'}
        if listed:
            return 202, {'worker_id': listed[0]['id']}
        if url in self.unreachable:
            self.adding.add(url)
            return 202, {'worker_id': '01a2331e-d20c-7292-88f5-87881ce043eb'}
        entry = self.entry(url)
        self.workers.append(entry)
        return 202, {'worker_id': entry['id']}

    def remove(self, worker_id):
        if self.flavour == 'smg':
            for worker in self.workers:
                if worker['id'] == worker_id:
                    worker.update(status='draining', is_healthy=False)
                    self.draining[worker_id] = self.drain_polls
        else:
            self.workers = [w for w in self.workers if w['id'] != worker_id]

    def end_drains(self):
        for worker_id in list(self.draining):
            self.draining[worker_id] -= 1
            if self.draining[worker_id] < 0:
                del self.draining[worker_id]
                self.workers = [w for w in self.workers if w['id'] != worker_id]


@pytest.fixture
def fake_router():
    router = FakeRouter('router-client-key')
    yield router
    router.server.shutdown()


@pytest.fixture
def fake_smg():
    router = FakeRouter('router-admin-key', flavour='smg')
    yield router
    router.server.shutdown()
