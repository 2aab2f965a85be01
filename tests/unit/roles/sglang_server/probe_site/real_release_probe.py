# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What starts in place of the HTTP server when test_sglang_launch_real_releases.py runs the
launcher on a real SGLang release (sitecustomize.py next to it installs it).

The launcher runs the release's own `sglang.launch_server` (or `sglang serve`), which parses the
command line into ServerArgs and hands them to `sglang.srt.entrypoints.http_server.launch_server`:
there, instead of GPU workers, this probe goes through the release's own code that logs, serves
and dumps the arguments. It writes what the server received (digests of the keys, never the keys)
to report.json in INFEROPS_PROBE_DIR, with the dumps, then waits until the test closes its stdin,
so that the test can read /proc/PID of the running server. Steps a release does not have are left
out by looking for them, as the launcher does.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import asyncio
import hashlib
import importlib.abc
import importlib.machinery
import json
import logging
import os
import sys
import types

HTTP_SERVER = 'sglang.srt.entrypoints.http_server'


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest() if isinstance(text, str) else None


async def _internal_state():
    return [{}]


def server_info(server_args):
    """The /server_info endpoint's own coroutine, on a stand-in of the global state it reads."""
    from sglang.srt.entrypoints import http_server
    manager = types.SimpleNamespace(server_args=server_args, get_internal_state=_internal_state, startup_time=0.0)
    http_server._global_state = types.SimpleNamespace(tokenizer_manager=manager, scheduler_info={'status': 'ready'})
    return asyncio.run(http_server.server_info())


def dumps(server_args, probe_dir):
    """TokenizerManager's own dump methods, on a stand-in holding what they read."""
    from sglang.srt.managers.tokenizer_manager import TokenizerManager
    manager = types.SimpleNamespace(server_args=server_args, crash_dump_folder=probe_dir, crash_dump_performed=False,
                                    crash_dump_request_list=[({'text': 'hello'}, {'text': 'hi'}, 0.0, 0.0)],
                                    rid_to_state={})
    for name in ('_server_args_for_dump', '_dump_config_snapshot', 'resolved_config_dict'):
        if hasattr(TokenizerManager, name):
            setattr(manager, name, getattr(TokenizerManager, name).__get__(manager))

    async def request_dump():
        TokenizerManager._dump_data_to_file(manager, [({'text': 'hello'}, {}, 0.0, 0.0)],
                                            os.path.join(probe_dir, 'requests.pkl'), 'request dump')
        current = asyncio.current_task()
        await asyncio.gather(*[task for task in asyncio.all_tasks() if task is not current])

    asyncio.run(request_dump())
    TokenizerManager.dump_requests_before_crash(manager, hostname='probe')


def probe(server_args, *_args, **_kwargs):
    """Stands for http_server.launch_server(server_args)."""
    probe_dir = os.environ['INFEROPS_PROBE_DIR']
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format='[%(asctime)s] %(message)s')
    logger = logging.getLogger('sglang.srt.entrypoints.engine')
    token_path = os.environ.get('HF_TOKEN_PATH')
    with open(token_path) as handle:
        token = handle.read()
    report = {'pid': os.getpid(), 'argv': list(sys.argv), 'api_key_sha256': digest(server_args.api_key),
              'admin_api_key_sha256': digest(server_args.admin_api_key), 'hf_token_path': token_path,
              'hf_token_mode': oct(os.stat(token_path).st_mode & 0o777), 'hf_token_sha256': digest(token), 'steps': []}
    if hasattr(server_args, 'resolve_once'):
        # 0.5.23: run_server resolved them; engine.py publishes before its start-up line.
        server_args.resolve_once()
        from sglang.srt.runtime_context import publish  # pylint: disable=import-error
        publish(server_args, role='tokenizer')
        from sglang.srt.entrypoints.engine import _server_args_for_logging  # pylint: disable=import-error
        logger.info('server_args=%s', _server_args_for_logging(server_args))
        report['steps'].append('engine._server_args_for_logging')
        report['launch_command'] = server_args.launch_command
    else:
        # 0.5.9: entrypoints/engine.py, inside _launch_subprocesses.
        logger.info('server_args=%r', server_args)
        report['steps'].append('repr(ServerArgs)')
    report['server_info'] = json.loads(json.dumps(server_info(server_args), default=str))
    report['steps'].append('http_server.server_info')
    dumps(server_args, probe_dir)
    report['steps'].append('TokenizerManager dumps')
    with open(os.path.join(probe_dir, 'report.json.part'), 'w') as handle:
        json.dump(report, handle, default=str)
    os.rename(os.path.join(probe_dir, 'report.json.part'), os.path.join(probe_dir, 'report.json'))
    sys.stdin.read()


class _ProbeAtStart(importlib.abc.MetaPathFinder):
    """Loads the release's http_server module, then puts the probe in place of its launch_server."""

    def find_spec(self, fullname, path, target=None):
        if fullname != HTTP_SERVER:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None:
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                module.launch_server = probe

            spec.loader.exec_module = exec_module
        return spec


def install():
    if os.environ.get('INFEROPS_PROBE_DIR'):
        sys.meta_path.insert(0, _ProbeAtStart())
