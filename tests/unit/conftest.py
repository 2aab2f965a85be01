"""What several test folders share: a stand-in for the SGLang router's worker API, and the real
router and SGLang wheels from PyPI."""
import hashlib
import json
import os
import shutil
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
            unavailable('the %s %s wheel is not in %s and pip could not fetch it (%s); run: %s -m pip download'
                        ' --no-deps -d %s %s==%s' % (package, version, ROUTER_WHEELHOUSE, proc.stdout.strip()[-200:],
                                                     sys.executable, ROUTER_WHEELHOUSE, package, version))
    assert _sha256(path) == sha256, '%s is not the %s %s wheel PyPI publishes' % (path, package, version)
    return path


def unavailable(message):
    """Skip a test whose pinned download failed; in CI (CI=true), where PyPI must answer, fail it."""
    if os.environ.get('CI') == 'true':
        pytest.fail(message + ' (CI=true: a test that needs a pinned download fails rather than skips)')
    pytest.skip(message)


# The SGLang releases the sglang_server role installs: the wheel on PyPI (the platform pip asks for,
# its sha256) and, pinned, the packages the server's modules import on start-up that are neither
# GPU-only nor the stand-ins of tests/unit/roles/sglang_server/cpu_stubs/sglang_cpu_stubs.py. The
# versions of transformers and tokenizers are the ones each release requires.
_SGLANG_START_UP_PACKAGES = ('dill==0.4.1', 'msgspec==0.23.0', 'numpy==2.4.6', 'orjson==3.13.0',
                             'partial_json_parser==0.2.1.1.post7', 'pillow==13.0.0', 'psutil==7.2.2',
                             'pybase64==1.5.1', 'regex==2026.11.19', 'tqdm==4.70.1', 'uvloop==0.23.0',
                             'safetensors==0.8.0', 'filelock==4.3.2', 'fsspec==2026.9.0', 'hf_xet==1.8.0')
SGLANG_RELEASES = {
    '0.5.9': ('any', '8a936c4d25fea605f44254e533cff2144c73ceffbc1f8738aba393461bbb64d1',
              _SGLANG_START_UP_PACKAGES + ('transformers==4.57.1', 'tokenizers==0.22.1', 'huggingface_hub==0.36.0')),
    '0.5.23': ('manylinux_2_34_x86_64', '00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937',
               _SGLANG_START_UP_PACKAGES + ('transformers==5.19.0', 'tokenizers==0.23.2', 'huggingface_hub==2.4.0')),
}
# What CPython 3.11 on Debian 12 (glibc 2.36) installs; pip does not widen a platform it is given.
_MANYLINUX = tuple('--platform=manylinux%s_x86_64' % tag for tag in ('_2_34', '_2_28', '_2_17', '2014'))
CPU_STUBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'roles', 'sglang_server', 'cpu_stubs')


def _pip(*args):
    proc = subprocess.run([sys.executable, '-m', 'pip'] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout.strip()


def python_311():
    """A Python 3.11, which the 0.5.23 wheel is built for: this one, or else the repository's .venv
    (`make venv`, which the ansible-core matrix of Python 3.12 and later runs after)."""
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    candidate = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '.venv', 'bin', 'python')
    if os.path.exists(candidate):
        proc = subprocess.run([candidate, '-c', 'import sys; print(sys.version_info[:2] == (3, 11))'],
                              stdout=subprocess.PIPE, universal_newlines=True, check=False)
        if proc.stdout.strip() == 'True':
            return os.path.abspath(candidate)
    return None


def fetch_sglang_wheel(version):
    """The path of the SGLang ``version`` wheel PyPI publishes, downloaded into the wheelhouse once."""
    platform, sha256, _packages = SGLANG_RELEASES[version]
    prefix = 'sglang-%s-' % version
    found = [name for name in (os.listdir(ROUTER_WHEELHOUSE) if os.path.isdir(ROUTER_WHEELHOUSE) else [])
             if name.startswith(prefix) and name.endswith('.whl')]
    if not found:
        pick = ['--platform', platform, '--python-version', '3.11'] if platform != 'any' else []
        rc, out = _pip('download', '-q', '--no-deps', '--only-binary=:all:', *pick,
                       '-d', ROUTER_WHEELHOUSE, 'sglang==%s' % version)
        found = [name for name in os.listdir(ROUTER_WHEELHOUSE) if name.startswith(prefix) and name.endswith('.whl')]
        if rc != 0 or not found:
            unavailable('the SGLang %s wheel is not in %s and pip could not fetch it: %s'
                        % (version, ROUTER_WHEELHOUSE, out[-300:]))
    path = os.path.join(ROUTER_WHEELHOUSE, found[0])
    assert _sha256(path) == sha256, '%s is not the SGLang %s wheel PyPI publishes' % (path, version)
    return path


def sglang_release_path(version):
    """(Python, PYTHONPATH) that run SGLang ``version``'s own server code on a CPU: a Python 3.11,
    and the stand-ins first, then a folder (kept in the wheelhouse between runs) holding the
    unpacked wheel and its pinned start-up packages, built for CPython 3.11 on x86_64 Linux."""
    _platform, _sha256, packages = SGLANG_RELEASES[version]
    python = python_311()
    if python is None:
        unavailable('SGLang %s runs on Python 3.11 (its wheel is built for it): this is %s, and no'
                    ' .venv with Python 3.11 is here (make venv)' % (version, sys.version.split()[0]))
    pins = hashlib.sha256(' '.join(packages).encode()).hexdigest()[:12]
    site = os.path.join(ROUTER_WHEELHOUSE, 'sglang-%s-site-py311-%s' % (version, pins))
    if not os.path.isdir(site):
        wheel = fetch_sglang_wheel(version)
        building = tempfile.mkdtemp(prefix=os.path.basename(site) + '.', dir=ROUTER_WHEELHOUSE)
        try:
            rc, out = _pip('install', '-q', '--no-deps', '--only-binary=:all:', '--no-compile', '--target', building,
                           '--python-version', '3.11', '--implementation', 'cp', *(_MANYLINUX + packages))
            if rc != 0:
                unavailable('pip could not install the packages SGLang %s imports on start-up: %s'
                            % (version, out[-300:]))
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(building)
            try:
                os.rename(building, site)
            except OSError:
                if not os.path.isdir(site):  # another run built it first: keep that one
                    raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return python, os.pathsep.join([CPU_STUBS, site])


@pytest.fixture(scope='session')
def sglang_release():
    """Callable: SGLang version -> (Python, PYTHONPATH) that run that release (sglang_release_path)."""
    return sglang_release_path


@pytest.fixture(scope='session')
def sglang_wheel_file():
    """Callable: ``(version, path inside the wheel)`` -> that file's text, from the real SGLang wheel."""
    def read(version, member):
        with zipfile.ZipFile(fetch_sglang_wheel(version)) as wheel:
            return wheel.read(member).decode('utf-8')
    return read


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
        # /readiness answers 503 for this many polls before it looks at the workers.
        self.not_ready_polls = 0
        self.readiness_polls = 0
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
                # Open to anyone, as the routers' probes are: 200 once a healthy worker is listed.
                if self.path == '/readiness':
                    router.readiness_polls += 1
                    if router.readiness_polls > router.not_ready_polls and any(w['is_healthy'] for w in router.workers):
                        self._reply(200, {'status': 'ready'})
                    else:
                        self._reply(503, {'status': 'not ready', 'reason': 'insufficient healthy workers'})
                elif self._authorized() and self.path == '/workers':
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
