"""What several test folders share: a stand-in for the SGLang router's worker API."""
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class FakeRouter:
    """sglang-router 0.3.2's /workers API as the module and the launcher use it: GET /workers, POST /workers
    (202, the worker listed healthy at once), DELETE /workers/{id}; every request must carry the client key."""

    def __init__(self, api_key):
        self.api_key = api_key
        self.workers = []
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
                    self._reply(200, {'workers': router.workers, 'total': len(router.workers)})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                router.requests.append(('POST', self.path, body))
                if self._authorized():
                    worker_id = str(uuid.uuid4())
                    router.workers.append({'id': worker_id, 'url': body['url'], 'model_id': 'm',
                                           'is_healthy': True, 'load': 0})
                    self._reply(202, {'worker_id': worker_id})

            def do_DELETE(self):
                router.requests.append(('DELETE', self.path, None))
                if self._authorized():
                    worker_id = self.path.rsplit('/', 1)[-1]
                    router.workers = [w for w in router.workers if w['id'] != worker_id]
                    self._reply(202, {})

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def fake_router():
    router = FakeRouter('router-client-key')
    yield router
    router.server.shutdown()
