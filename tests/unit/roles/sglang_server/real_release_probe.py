# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run by test_sglang_launch_real_releases.py with the Python of a real SGLang release.

    python real_release_probe.py LAUNCHER PROBE_DIR MODEL_DIR

The launcher's `run` starts `sglang.launch_server` with the keys as sglang.service does; in
place of the module (which would start GPU workers) this probe then takes the steps of the
release's launch_server and goes through the release's own code that logs, serves and dumps
the arguments. What they produce goes to stderr (the log) and PROBE_DIR (report.json, the
dumps). Steps a release does not have are left out by looking for them, as the launcher does.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import asyncio
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import types

API_KEY = 'sk-real-release-Hq2x9K'
ADMIN_KEY = 'sk-real-admin-Pv6n3D'


def load_launcher(path):
    loader = importlib.machinery.SourceFileLoader('sglang_launch_probe', path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


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


def probe(probe_dir):
    from sglang.srt.server_args import prepare_server_args
    server_args = prepare_server_args(sys.argv[1:])
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format='[%(asctime)s] %(message)s')
    logger = logging.getLogger('sglang.srt.entrypoints.engine')
    # The steps below stand for the release's launch_server, which parses its argv the same way.
    with open(importlib.util.find_spec('sglang.launch_server').origin) as handle:
        parses_argv = 'server_args = prepare_server_args(sys.argv[1:])' in handle.read()
    report = {'argv': list(sys.argv), 'launch_server_parses_argv': parses_argv,
              'key_held': server_args.api_key == API_KEY,
              'admin_key_held': server_args.admin_api_key == ADMIN_KEY, 'steps': []}
    if hasattr(server_args, 'resolve_once'):
        # 0.5.23: run_server resolves; engine.py publishes before its start-up line.
        server_args.resolve_once()
        from sglang.srt.runtime_context import publish
        publish(server_args, role='tokenizer')
        from sglang.srt.entrypoints.engine import _server_args_for_logging
        logger.info('server_args=%s', _server_args_for_logging(server_args))
        report['steps'].append('engine._server_args_for_logging')
        report['launch_command'] = server_args.launch_command
    else:
        # 0.5.9: entrypoints/engine.py:1031, inside _launch_subprocesses.
        logger.info('server_args=%r', server_args)
        report['steps'].append('repr(ServerArgs)')
    report['server_info'] = json.loads(json.dumps(server_info(server_args), default=str))
    report['steps'].append('http_server.server_info')
    dumps(server_args, probe_dir)
    report['steps'].append('TokenizerManager dumps')
    with open(os.path.join(probe_dir, 'report.json'), 'w') as handle:
        json.dump(report, handle, default=str)


def main(launcher_path, probe_dir, model_dir):
    launcher = load_launcher(launcher_path)
    launcher.runpy = types.SimpleNamespace(run_module=lambda *args, **kwargs: probe(probe_dir))
    return launcher.run('sglang.launch_server', ['--model-path', model_dir, '--device', 'cpu'],
                        secrets={'--api-key': API_KEY, '--admin-api-key': ADMIN_KEY})


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:4]))
