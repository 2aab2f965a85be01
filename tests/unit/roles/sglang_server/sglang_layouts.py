# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small `sglang` packages laid out as the launcher meets SGLang 0.5.9 and 0.5.23.

Each keeps, under the same module and attribute names, only the code through which its
release writes or serves the server arguments (wheel paths and lines in the comments; the
notes on the two releases' APIs list them). `launch_server` parses its argv as the real one
does, then goes through every one of those paths and writes what they produced under
$PROBE_DIR, so that a test can look for the key in all of it. The real releases' own code is
run by test_sglang_launch_real_releases.py where an environment with them is at hand.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

# What both releases' launch_server does after the release's own paths: one log line the
# launcher knows nothing of, and a report of what the server itself holds.
_REPORT = '''
    logger.warning("a line no hook knows of: %s", server_args.api_key)
    key_held = hashlib.sha256((server_args.api_key or "").encode()).hexdigest()
    with open(os.path.join(PROBE_DIR, "report.json"), "w") as handle:
        json.dump({"server_info": server_info, "argv": sys.argv,
                   "key_held": key_held == os.environ["PROBE_KEY_SHA256"]}, handle, default=str)
'''

_HEADER = '''import dataclasses, hashlib, json, logging, os, sys
PROBE_DIR = os.environ["PROBE_DIR"]
logger = logging.getLogger("sglang.srt.entrypoints.engine")
'''

# sglang/cli/main.py (both releases): the console script `sglang` = sglang.cli.main:main.
_CLI_MAIN = '''
import argparse


def main():
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers(dest="subcommand", required=True)
    subparsers.add_parser("serve", add_help=False)
    args, extra_argv = parser.parse_known_args()
    from sglang.cli.serve import serve
    serve(args, extra_argv)
'''
_CLI_SERVE = '''
def serve(args, extra_argv):
    from sglang.launch_server import run_server
    from sglang.srt.server_args import prepare_server_args
    run_server(prepare_server_args(extra_argv))
'''

SGLANG_0_5_9 = {
    'sglang/__init__.py': '',
    'sglang/srt/__init__.py': '',
    'sglang/srt/managers/__init__.py': '',
    # sglang/srt/server_args.py: a dataclass (line 404 api_key, 405 admin_api_key); its
    # __post_init__ does the checks, prepare_server_args parses argv into it.
    'sglang/srt/server_args.py': '''
import dataclasses
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    api_key: Optional[str] = None
    admin_api_key: Optional[str] = None
    port: int = 30000


def prepare_server_args(argv):
    options = dict(zip(argv[::2], argv[1::2]))
    return ServerArgs(model_path=options["--model-path"], api_key=options.get("--api-key"),
                      admin_api_key=options.get("--admin-api-key"), port=int(options.get("--port", 30000)))
''',
    # sglang/srt/managers/tokenizer_manager.py 2036-2048 (_dump_data_to_file) and 2053-2110
    # (dump_requests_before_crash): server_args and " ".join(sys.argv) go into the pickles.
    'sglang/srt/managers/tokenizer_manager.py': '''
import os, pickle, sys


class TokenizerManager:
    def __init__(self, server_args, crash_dump_folder):
        self.server_args = server_args
        self.crash_dump_folder = crash_dump_folder

    def _dump_data_to_file(self, data_list, filename, log_message):
        to_dump_with_server_args = {"server_args": self.server_args, "requests": data_list.copy()}
        with open(filename, "wb") as f:
            pickle.dump(to_dump_with_server_args, f)

    def dump_requests_before_crash(self):
        data_to_dump_with_server_args = {"server_args": self.server_args, "requests": [],
                                         "launch_command": " ".join(sys.argv)}
        with open(os.path.join(self.crash_dump_folder, "crash_dump.pkl"), "wb") as f:
            pickle.dump(data_to_dump_with_server_args, f)
''',
    'sglang/launch_server.py': _HEADER + '''
from sglang.srt.server_args import prepare_server_args
from sglang.srt.managers.tokenizer_manager import TokenizerManager


def run_server(server_args):
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", force=True)
    logger.info(f"{server_args=}")  # entrypoints/engine.py:1031
    # entrypoints/http_server.py:606, /get_server_info and /server_info
    server_info = {**dataclasses.asdict(server_args), "version": "0.5.9"}
    manager = TokenizerManager(server_args, PROBE_DIR)
    manager._dump_data_to_file([], os.path.join(PROBE_DIR, "requests.pkl"), "dump")
    manager.dump_requests_before_crash()
''' + _REPORT + '''

if __name__ == "__main__":
    run_server(prepare_server_args(sys.argv[1:]))
''',
    # sglang/cli/main.py and serve.py: `sglang serve ARG...` parses ARG... with the same
    # prepare_server_args, imported when the subcommand runs, and calls launch_server.run_server.
    'sglang/cli/__init__.py': '',
    'sglang/cli/main.py': _CLI_MAIN,
    'sglang/cli/serve.py': _CLI_SERVE,
}

SGLANG_0_5_23 = {
    'sglang/__init__.py': '',
    'sglang/srt/__init__.py': '',
    'sglang/srt/managers/__init__.py': '',
    'sglang/srt/entrypoints/__init__.py': '',
    'sglang/srt/utils/__init__.py': '',
    'sglang/srt/sampling/__init__.py': '',
    'sglang/srt/sampling/watermarking/__init__.py': '',
    # sglang/srt/server_args.py: a msgspec defstruct (551), sealed once resolved (474), its
    # __repr__ hides only the watermark fields (307), resolved_dict() (316), launch_command
    # (303) set by prepare_server_args from the argv it parsed (717).
    'sglang/srt/server_args.py': '''
class ServerArgs:
    FIELDS = ("model_path", "api_key", "admin_api_key", "port", "watermark_key")

    def __init__(self, model_path, api_key=None, admin_api_key=None, port=30000, watermark_key=None):
        self.model_path, self.api_key, self.admin_api_key = model_path, api_key, admin_api_key
        self.port, self.watermark_key = port, watermark_key

    def __setattr__(self, name, value):
        if not name.startswith("_") and getattr(self, "_resolution_finished", False):
            raise AttributeError(f"server_args.{name} assigned after resolution; server_args is read-only")
        object.__setattr__(self, name, value)

    @property
    def launch_command(self):
        return getattr(self, "_launch_command", None)

    def __repr__(self):
        hidden = {"watermark_key", "watermark_key_b", "watermark_config"}
        return "ServerArgs(%s)" % ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS
                                            if name not in hidden)

    def resolve_once(self):
        self._resolution_finished = True

    def resolved_dict(self):
        return {name: getattr(self, name) for name in self.FIELDS}


def prepare_server_args(argv):
    options = dict(zip(argv[::2], argv[1::2]))
    server_args = ServerArgs(model_path=options["--model-path"], api_key=options.get("--api-key"),
                             admin_api_key=options.get("--admin-api-key"), port=int(options.get("--port", 30000)))
    from sglang.srt.sampling.watermarking.core import redact_watermark_command_line
    server_args._launch_command = redact_watermark_command_line(argv, None)
    return server_args
''',
    # sglang/srt/sampling/watermarking/core.py 25-134, the dict, sequence and record branches
    # (the record one for ServerArgs: copy, then the Struct's own setter).
    'sglang/srt/sampling/watermarking/core.py': '''
import copy

WATERMARK_SECRET_FIELD_NAMES = frozenset({"watermark_key", "watermark_key_b", "watermark_config"})


def redact_watermark_secrets(value, *, in_watermark_config=False):
    if hasattr(value, "resolved_dict"):
        result = copy.copy(value)
        for name in value.FIELDS:
            if name in WATERMARK_SECRET_FIELD_NAMES and getattr(value, name) is not None:
                object.__setattr__(result, name, "<redacted>")
        return result
    if isinstance(value, dict):
        return {key: ("<redacted>" if key in WATERMARK_SECRET_FIELD_NAMES else redact_watermark_secrets(item))
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_watermark_secrets(item) for item in value)
    return value


def redact_watermark_command_line(argv, watermark_config=None):
    result, redact_next = [], False
    for argument in argv:
        if redact_next:
            result.append("<redacted>")
            redact_next = False
        elif argument == "--watermark-config":
            result.append(argument)
            redact_next = True
        else:
            result.append(argument)
    return " ".join(result)
''',
    # sglang/srt/entrypoints/engine.py 173-174, logged at 311 and 1185.
    'sglang/srt/entrypoints/engine.py': '''
from sglang.srt.sampling.watermarking.core import redact_watermark_secrets


def _server_args_for_logging(server_args):
    return redact_watermark_secrets(server_args.resolved_dict())
''',
    # sglang/srt/utils/common.py 3583-3592, what /server_info (http_server.py 863-891) redacts.
    'sglang/srt/utils/common.py': '''
def build_server_info(server_args, scheduler_info):
    result = server_args.resolved_dict()
    result["launch_command"] = server_args.launch_command
    result.update(scheduler_info)
    return result
''',
    # sglang/srt/managers/tokenizer_manager.py: imports both redactions by name (172-173);
    # _server_args_for_dump (2353) is the object itself unless watermarking is on; the dumps
    # 3359-3390 and 3392-3470.
    'sglang/srt/managers/tokenizer_manager.py': '''
import os, pickle, sys
from sglang.srt.sampling.watermarking.core import redact_watermark_command_line, redact_watermark_secrets


class TokenizerManager:
    def __init__(self, server_args, crash_dump_folder):
        self.server_args = server_args
        self.crash_dump_folder = crash_dump_folder

    def _server_args_for_dump(self):
        return self.server_args

    def _dump_config_snapshot(self):
        return redact_watermark_secrets(self.server_args.resolved_dict())

    def _dump_data_to_file(self, data_list, filename, log_message):
        to_dump_with_server_args = {"server_args": self._server_args_for_dump(),
                                    "resolved_config": self._dump_config_snapshot(),
                                    "requests": redact_watermark_secrets(data_list.copy())}
        with open(filename, "wb") as f:
            pickle.dump(to_dump_with_server_args, f)

    def dump_requests_before_crash(self):
        data_to_dump_with_server_args = {
            "server_args": self._server_args_for_dump(),
            "resolved_config": self._dump_config_snapshot(),
            "requests": [],
            "launch_command": redact_watermark_command_line(sys.argv, None),
        }
        with open(os.path.join(self.crash_dump_folder, "crash_dump.pkl"), "wb") as f:
            pickle.dump(data_to_dump_with_server_args, f)
''',
    'sglang/launch_server.py': _HEADER + '''
from sglang.srt.server_args import prepare_server_args
from sglang.srt.entrypoints.engine import _server_args_for_logging
from sglang.srt.managers.tokenizer_manager import TokenizerManager
from sglang.srt.sampling.watermarking.core import redact_watermark_secrets
from sglang.srt.utils.common import build_server_info



def run_server(server_args):
    server_args.resolve_once()  # launch_server.py run_server
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", force=True)
    logger.info(f"server_args={_server_args_for_logging(server_args)}")
    logger.info("ServerArgs as repr: %r", server_args)
    server_info = redact_watermark_secrets({**build_server_info(server_args, {"status": "ready"}),
                                            "version": "0.5.23"})
    manager = TokenizerManager(server_args, PROBE_DIR)
    manager._dump_data_to_file([], os.path.join(PROBE_DIR, "requests.pkl"), "dump")
    manager.dump_requests_before_crash()
''' + _REPORT + '''

if __name__ == "__main__":
    import warnings
    warnings.warn("'python -m sglang.launch_server' is still supported, but 'sglang serve' is the recommended "
                  "entrypoint.", UserWarning, stacklevel=1)
    run_server(prepare_server_args(sys.argv[1:]))
''',
    'sglang/cli/__init__.py': '',
    'sglang/cli/main.py': _CLI_MAIN,
    'sglang/cli/serve.py': _CLI_SERVE,
}

LAYOUTS = {'0.5.9': SGLANG_0_5_9, '0.5.23': SGLANG_0_5_23}


def _changed(layout, path, old, new):
    files = dict(layout)
    assert old in files[path], (path, old)
    files[path] = files[path].replace(old, new)
    return files


# Releases the launcher does not know, each missing one place it masks; `why` is in its message.
UNKNOWN_LAYOUTS = {
    # ServerArgs neither a dataclass nor with resolved_dict(): how /server_info shows it is unknown.
    'unknown ServerArgs': (_changed(SGLANG_0_5_23, 'sglang/srt/server_args.py', 'def resolved_dict(self)',
                                    'def as_dict(self)'), 'resolved_dict'),
    # A redaction that no longer reads the names at each call.
    'redaction with its own names': (_changed(SGLANG_0_5_23, 'sglang/srt/sampling/watermarking/core.py',
                                              'def redact_watermark_secrets(value, *, in_watermark_config=False):',
                                              'def redact_watermark_secrets(value, *, in_watermark_config=False,\n'
                                              '                             WATERMARK_SECRET_FIELD_NAMES='
                                              'WATERMARK_SECRET_FIELD_NAMES):'),
                                     'does not hide further field names'),
    # Dumps written by methods of other names.
    'unknown dumps': (_changed(SGLANG_0_5_9, 'sglang/srt/managers/tokenizer_manager.py',
                               'def dump_requests_before_crash(self)', 'def dump_before_crash(self)'),
                      'dump_requests_before_crash'),
    # A release whose ServerArgs cannot even be imported.
    'no ServerArgs': ({'sglang/__init__.py': '', 'sglang/launch_server.py': 'raise SystemExit("started")'},
                      'cannot import sglang.srt.server_args'),
}


def write_layout(files, root):
    for path, text in files.items():
        target = os.path.join(str(root), path)
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target))
        with open(target, 'w') as handle:
            handle.write(text)
    return str(root)
