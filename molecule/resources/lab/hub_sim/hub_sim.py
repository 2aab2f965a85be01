"""Lab only: a Hugging Face Hub stand-in that the real huggingface_hub downloads from (HF_ENDPOINT).

It serves small generated model repositories at one fixed commit each, with what
`hf download --revision` and the Hub's API use:

  GET  /api/models/{org}/{name}/revision/{rev}[?blobs=true]   the files (sizes, LFS sha256 with blobs=true)
  HEAD /{org}/{name}/resolve/{rev}/{file}                      X-Repo-Commit, ETag, X-Linked-Etag, X-Linked-Size
  GET  /{org}/{name}/resolve/{rev}/{file}                      the bytes; Range: bytes=N- resumes (206)

The repositories are the lab's cases, chosen by name:

  inferops-lab/tiny-model                a good model: config.json, model.safetensors.index.json, two shards
  inferops-lab/tiny-model-bad-hash       the Hub states an sha256 for a shard that its bytes do not have
  inferops-lab/tiny-model-missing-shard  the index lists a third shard that the repository lacks

A file named in STATE_DIR/interrupt-once is sent only half once (the connection then drops, as on
a network failure) and the switch file is removed. Every request is appended to
STATE_DIR/requests.log as "METHOD path range", so that tests can see what was downloaded and resumed.
"""

import argparse
import hashlib
import http.server
import json
import os
import re
import struct
import threading

REPOS = ('tiny-model', 'tiny-model-bad-hash', 'tiny-model-missing-shard')
ORG = 'inferops-lab'
_lock = threading.Lock()


def _safetensors(name, size):
    """A valid safetensors file of one U8 tensor of about `size` bytes, its bytes fixed by `name`."""
    data = hashlib.shake_256(name.encode()).digest(size)
    header = json.dumps({'weight': {'dtype': 'U8', 'shape': [size], 'data_offsets': [0, size]}}).encode()
    header += b' ' * (-len(header) % 8)
    return struct.pack('<Q', len(header)) + header + data


def _git_blob_id(content):
    return hashlib.sha1(b'blob %d\0' % len(content) + content).hexdigest()


def build_repo(name, shard_size, last_shard_size):
    """{'commit', 'files': {path: {'content', 'size', 'etag', 'lfs_sha256' or None}}} of one repository."""
    shards = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']
    listed = list(shards)
    if name == 'tiny-model-missing-shard':
        listed = ['model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors',
                  'model-00003-of-00003.safetensors']
        shards = listed[:2]
    contents = {
        'config.json': json.dumps({'architectures': ['LlamaForCausalLM'], 'model_type': 'llama',
                                   'hidden_size': 64, 'num_hidden_layers': len(listed)}, indent=2).encode(),
        'model.safetensors.index.json': json.dumps({
            'metadata': {'total_size': shard_size * len(listed)},
            'weight_map': dict(('model.layers.%d.weight' % i, shard) for i, shard in enumerate(listed))},
            indent=2).encode(),
    }
    for shard in shards:
        contents[shard] = _safetensors(shard, last_shard_size if shard == shards[-1] else shard_size)
    files = {}
    for path, content in sorted(contents.items()):
        lfs = path.endswith('.safetensors')
        sha256 = hashlib.sha256(content).hexdigest() if lfs else None
        if name == 'tiny-model-bad-hash' and path == shards[-1]:
            # What the Hub states; the bytes served are the shard's own.
            sha256 = hashlib.sha256(b'not the bytes that are served').hexdigest()
        files[path] = {'content': content, 'size': len(content), 'lfs_sha256': sha256,
                       'etag': sha256 or _git_blob_id(content)}
    commit = hashlib.sha1(json.dumps([name] + [(p, f['etag']) for p, f in sorted(files.items())]).encode()).hexdigest()
    return {'commit': commit, 'files': files}


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    repos = {}
    state_dir = '/run/inferops-lab-hub'

    def log_message(self, *args):  # the request log below says what tests need
        pass

    def _log(self):
        with _lock, open(os.path.join(self.state_dir, 'requests.log'), 'a') as handle:
            handle.write('%s %s %s\n' % (self.command, self.path, self.headers.get('Range') or '-'))

    def _error(self, status, code, message):
        body = json.dumps({'error': message}).encode()
        self.send_response(status)
        self.send_header('X-Error-Code', code)
        self.send_header('X-Error-Message', message)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def _repo(self, org, name, revision):
        repo = self.repos.get('%s/%s' % (org, name))
        if repo is None:
            self._error(404, 'RepoNotFound', 'Repository not found')
        elif revision not in ('main', repo['commit']):
            self._error(404, 'RevisionNotFound', 'Invalid rev id: %s' % revision)
            repo = None
        return repo

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self._log()
        path, query = (self.path.split('?', 1) + [''])[:2]
        api = re.match(r'^/api/models/([^/]+)/([^/]+)/revision/([^/]+)$', path)
        resolve = re.match(r'^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$', path)
        if api:
            return self._listing(api.group(1), api.group(2), api.group(3).replace('%2F', '/'), 'blobs=true' in query)
        if resolve:
            return self._file(*resolve.groups())
        return self._error(404, 'EntryNotFound', 'Not found')

    def _listing(self, org, name, revision, blobs):
        repo = self._repo(org, name, revision)
        if repo is None:
            return
        siblings = []
        for path, item in sorted(repo['files'].items()):
            sibling = {'rfilename': path}
            if blobs:
                sibling.update(size=item['size'], blobId=_git_blob_id(item['content']))
                if item['lfs_sha256']:
                    sibling['lfs'] = {'sha256': item['lfs_sha256'], 'size': item['size'], 'pointerSize': 134}
            siblings.append(sibling)
        body = json.dumps({'id': '%s/%s' % (org, name), 'modelId': '%s/%s' % (org, name), 'sha': repo['commit'],
                           'private': False, 'gated': False, 'disabled': False, 'siblings': siblings}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def _file(self, org, name, revision, path):
        repo = self._repo(org, name, revision)
        if repo is None:
            return
        item = repo['files'].get(path)
        if item is None:
            return self._error(404, 'EntryNotFound', '%s does not exist at %s' % (path, revision))
        content, start = item['content'], 0
        match = re.match(r'^bytes=(\d+)-$', self.headers.get('Range') or '')
        if match and self.command == 'GET':
            start = int(match.group(1))
            if start >= len(content):
                return self._error(416, 'RangeNotSatisfiable', 'Range not satisfiable')
        self.send_response(206 if start else 200)
        self.send_header('X-Repo-Commit', repo['commit'])
        self.send_header('ETag', '"%s"' % item['etag'])
        if item['lfs_sha256']:
            self.send_header('X-Linked-Etag', '"%s"' % item['etag'])
            self.send_header('X-Linked-Size', str(item['size']))
        self.send_header('Accept-Ranges', 'bytes')
        self.send_header('Content-Length', str(len(content) - start))
        if start:
            self.send_header('Content-Range', 'bytes %d-%d/%d' % (start, len(content) - 1, len(content)))
        self.end_headers()
        if self.command == 'HEAD':
            return
        if self._interrupt(path):
            self.wfile.write(content[start:start + (len(content) - start) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(content[start:])

    def _interrupt(self, path):
        switch = os.path.join(self.state_dir, 'interrupt-once')
        with _lock:
            try:
                with open(switch) as handle:
                    wanted = handle.read().strip()
            except OSError:
                return False
            if wanted != path:
                return False
            os.unlink(switch)
            return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--bind', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=8090)
    parser.add_argument('--state-dir', default='/run/inferops-lab-hub')
    parser.add_argument('--shard-size', type=int, default=4 * 1024 * 1024)
    # Above huggingface_hub's 10 MiB write chunk even when cut in half: an interrupted download of
    # it leaves bytes in its .incomplete file for the next run to resume from.
    parser.add_argument('--last-shard-size', type=int, default=24 * 1024 * 1024)
    options = parser.parse_args()
    os.makedirs(options.state_dir, exist_ok=True)
    Hub.state_dir = options.state_dir
    Hub.repos = dict(('%s/%s' % (ORG, name), build_repo(name, options.shard_size, options.last_shard_size)) for name in REPOS)
    server = http.server.ThreadingHTTPServer((options.bind, options.port), Hub)
    server.serve_forever()


if __name__ == '__main__':
    main()
