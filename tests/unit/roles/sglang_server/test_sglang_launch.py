# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launcher of sglang.service: the API key reaches the server without a command line."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import importlib.machinery
import importlib.util
import json
import os
import runpy
import sys

import pytest

# The code under test runs on the node or is a third-party binary, not ansible-core: the
# ansible-core matrix (make core-matrix) leaves these tests out.
pytestmark = pytest.mark.no_ansible_core

ROLES = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles')
LAUNCHER = os.path.join(ROLES, 'sglang_launcher', 'files', 'sglang-launch')


@pytest.fixture
def launcher():
    loader = importlib.machinery.SourceFileLoader('sglang_launch_under_test', LAUNCHER)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    """A package `fake_server` whose launch_server records what it was started with. Not under
    `sglang.`, so that the launcher adds no masking (the tests below run that in a process of its own)."""
    package = tmp_path / 'fake_server'
    package.mkdir()
    (package / '__init__.py').write_text('')
    (package / 'launch_server.py').write_text(
        'import os, sys\n'
        'if __name__ == "__main__":\n'
        '    args = sys.argv[1:]\n'
        '    RESULT.update(argv=list(sys.argv), env=os.environ.get("SGLANG_API_KEY"),\n'
        '                  key=args[args.index("--api-key") + 1])\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n == 'fake_server' or n.startswith('fake_server.')]:
        monkeypatch.delitem(sys.modules, name)
    result = {}
    monkeypatch.setattr('builtins.RESULT', result, raising=False)
    return result


def test_api_key_moves_from_environment_to_the_module_argv_only(launcher, fake_server, monkeypatch):
    monkeypatch.setenv('SGLANG_API_KEY', 'sk-launch-test')
    monkeypatch.setattr(sys, 'argv', ['sglang-launch', 'run', 'fake_server.launch_server', '--port', '8000'])
    execs = []
    monkeypatch.setattr(launcher.os, 'execve', lambda path, argv, env: execs.append((path, argv, env)))
    launcher.main(['run', 'fake_server.launch_server', '--port', '8000'])
    # First stage: the process image is replaced with one whose environment lacks the key.
    (path, argv, env), = execs
    assert 'SGLANG_API_KEY' not in env and 'sk-launch-test' not in ' '.join(argv)
    assert argv[2:4] == ['run', '--secrets-fd'] and argv[5:] == ['fake_server.launch_server', '--port', '8000']
    # Second stage: the key comes from the pipe.
    assert launcher.main(argv[2:]) == 0
    assert fake_server['argv'][1:] == ['--port', '8000', '--api-key', 'sk-launch-test']
    # Worker processes started by the server must not inherit the key.
    assert fake_server['env'] is None
    assert 'SGLANG_API_KEY' not in os.environ


def test_the_running_process_environment_block_has_no_key(tmp_path):
    # A real exec: /proc/PID/environ of the process that runs the module must not show the key.
    import subprocess
    module = tmp_path / 'show_environ.py'
    module.write_text('import os\nprint(open("/proc/%d/environ" % os.getpid(), "rb").read().count(b"sk-environ"))\n'
                      'import sys\nprint(sys.argv[-1])\n')
    env = dict(os.environ, SGLANG_API_KEY='sk-environ-test', PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, LAUNCHER, 'run', 'show_environ'], env=env, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout.split()
    assert out == ['0', 'sk-environ-test']


def test_the_hf_token_reaches_the_server_and_its_workers_as_a_private_file(tmp_path):
    # A real exec, and a worker started the way SGLang starts its schedulers (a new process).
    import subprocess
    (tmp_path / 'worker.py').write_text(
        'import os, sys\n'
        'print(open("/proc/%d/environ" % os.getpid(), "rb").read().count(b"hf_environ"),\n'
        '      os.environ.get("HF_TOKEN"), os.environ["HF_TOKEN_PATH"] == sys.argv[1])\n')
    (tmp_path / 'show_token.py').write_text(
        'import os, stat, subprocess, sys\n'
        'path = os.environ["HF_TOKEN_PATH"]\n'
        'print(open("/proc/%d/environ" % os.getpid(), "rb").read().count(b"hf_environ"))\n'
        'print(oct(stat.S_IMODE(os.stat(path).st_mode)), open(path).read())\n'
        'sys.stdout.flush()\n'
        'subprocess.run([sys.executable, "-m", "worker", path], check=True)\n')
    env = dict(os.environ, HF_TOKEN='hf_environ_test', PYTHONPATH=str(tmp_path), TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, LAUNCHER, 'run', 'show_token'], env=env, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout.split()
    assert out == ['0', '0o600', 'hf_environ_test', '0', 'None', 'True']
    # Removed when the server exits.
    assert not list(tmp_path.glob('sglang-launch-*'))


def test_without_a_key_the_argv_is_unchanged(launcher, fake_server, monkeypatch):
    monkeypatch.delenv('SGLANG_API_KEY', raising=False)
    monkeypatch.setenv('SGLANG_ADMIN_API_KEY', '')
    with pytest.raises(ValueError):
        # The fake server looks the key up; no key means the launcher did not add one.
        launcher.run('fake_server.launch_server', ['--port', '8000'])


def test_wait_healthy_gives_up_when_the_server_process_is_gone(launcher, capsys):
    gone = 2 ** 22 + 12345  # above the default pid_max: no such process
    assert launcher.wait_healthy('http://127.0.0.1:9/health', gone, interval=0) == 1
    assert 'exited before it answered' in capsys.readouterr().err


def test_restore_workers_adds_the_recorded_workers_the_router_forgot(launcher, fake_router, tmp_path):
    fake_router.workers.append({'id': 'w1', 'url': 'http://10.0.0.11:8000', 'is_healthy': True})
    members = tmp_path / 'workers.json'
    members.write_text(json.dumps({'workers': {'http://10.0.0.11:8000': {'api_key': 'k1'},
                                               'http://10.0.0.12:8000': {'api_key': 'k2'},
                                               'http://10.0.0.13:8000': {'api_key': None}}}))
    assert launcher.restore_workers(fake_router.url, str(members), os.getpid(),
                                    secrets={'--api-key': fake_router.api_key}) == 0
    assert fake_router.requests == [('POST', '/workers', {'url': 'http://10.0.0.12:8000', 'api_key': 'k2'}),
                                    ('POST', '/workers', {'url': 'http://10.0.0.13:8000'})]


def test_restore_workers_never_fails_the_routers_start(launcher, tmp_path, capsys):
    members = tmp_path / 'workers.json'
    assert launcher.restore_workers('http://127.0.0.1:9', str(members), os.getpid(), secrets={}) == 0
    members.write_text(json.dumps({'workers': {'http://10.0.0.12:8000': {'api_key': None}}}))
    assert launcher.restore_workers('http://127.0.0.1:9', str(members), os.getpid(), secrets={},
                                    timeout=0.5, interval=0.1) == 0
    assert 'no worker restored' in capsys.readouterr().err


def test_restore_workers_takes_the_router_key_out_of_its_environment(launcher, monkeypatch, tmp_path):
    monkeypatch.setenv('SGLANG_API_KEY', 'router-client-key')
    execs = []
    monkeypatch.setattr(launcher.os, 'execve', lambda path, argv, env: execs.append((argv, env)))
    launcher.restore_workers('http://127.0.0.1:9', str(tmp_path / 'workers.json'), 1)
    argv, env = execs[0]
    assert argv[2:4] == ['restore-workers', '--secrets-fd'] and 'SGLANG_API_KEY' not in env
    assert 'router-client-key' not in ' '.join(argv)


def test_the_routers_admin_key_becomes_its_one_control_plane_key_without_a_command_line(launcher, monkeypatch):
    monkeypatch.setenv('SGLANG_API_KEY', 'servers-key')
    monkeypatch.setenv('SGLANG_ROUTER_ADMIN_API_KEY', 'admin:key-with-colons')
    execs = []
    monkeypatch.setattr(launcher.os, 'execve', lambda path, argv, env: execs.append((argv, env)))
    launcher.main(['run', 'smg.launch_router', '--port', '30000'])
    (argv, env), = execs
    assert 'SGLANG_ROUTER_ADMIN_API_KEY' not in env and 'SGLANG_API_KEY' not in env
    assert 'key-with-colons' not in ' '.join(argv) and 'servers-key' not in ' '.join(argv)
    started = []
    monkeypatch.setattr(runpy, 'run_module', lambda module, **kw: started.append((module, list(sys.argv))))
    assert launcher.main(argv[2:]) == 0
    assert started == [('smg.launch_router', ['smg.launch_router', '--port', '30000', '--api-key', 'servers-key',
                                              '--control-plane-api-keys',
                                              'inferops-serving:inferops.serving:admin:admin:key-with-colons'])]


def test_restore_workers_with_smg_uses_the_admin_key_and_takes_409_for_known(launcher, fake_smg, tmp_path, capsys):
    fake_smg.workers.append(fake_smg.entry('http://10.0.0.11:8000'))
    fake_smg.unreachable.add('http://10.0.0.13:8000')
    fake_smg.add('http://10.0.0.13:8000')
    members = tmp_path / 'workers.json'
    members.write_text(json.dumps({'workers': {'http://10.0.0.11:8000': {'api_key': 'k1'},
                                               'HTTP://10.0.0.12:8000/': {'api_key': 'k2'},
                                               'http://10.0.0.13:8000': {'api_key': None}}}))
    secrets = {'--api-key': 'servers-key', '--control-plane-api-keys': fake_smg.api_key}
    assert launcher.restore_workers(fake_smg.url, str(members), os.getpid(), secrets=secrets) == 0
    assert fake_smg.requests == [('POST', '/workers', {'url': 'http://10.0.0.12:8000', 'api_key': 'k2'}),
                                 ('POST', '/workers', {'url': 'http://10.0.0.13:8000'})]
    out = capsys.readouterr()
    assert 'the router has http://10.0.0.13:8000 already (409)' in out.out and out.err == ''


# --- the key in what SGLang logs, serves and dumps ------------------------------------------------

API_KEY = 'sk-launch-Zq8vT3'
ADMIN_KEY = 'sk-admin-Wm4pR7'


# What the unit runs for each release set's launch (release_sets.yml, launch_entry).
LAUNCHES = {'python -m sglang.launch_server': ['sglang.launch_server'],
            'sglang serve': ['sglang.cli.main:main', 'serve']}
RECOMMEND_SERVE = "'sglang serve' is the recommended entrypoint"


def start_layout(tmp_path, files, env_keys, launch='python -m sglang.launch_server'):
    """Run the launcher for real (both stages, a real exec) on an `sglang` package of `files`."""
    import hashlib
    import subprocess
    from sglang_layouts import write_layout
    probe = tmp_path / 'probe'
    probe.mkdir()
    env = dict(os.environ, PYTHONPATH=write_layout(files, tmp_path / 'site'), PROBE_DIR=str(probe),
               PROBE_KEY_SHA256=hashlib.sha256(env_keys.get('SGLANG_API_KEY', '').encode()).hexdigest(),
               **env_keys)
    command = [sys.executable, LAUNCHER, 'run'] + LAUNCHES[launch] + ['--model-path', 'm', '--port', '8000']
    proc = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    written = dict((path.name, path.read_bytes()) for path in probe.iterdir())
    return proc, written


@pytest.fixture(autouse=False)
def layouts_on_path():
    sys.path.insert(0, os.path.dirname(__file__))
    yield
    sys.path.remove(os.path.dirname(__file__))


@pytest.mark.parametrize('launch', sorted(LAUNCHES))
@pytest.mark.parametrize('release', ['0.5.9', '0.5.23'])
@pytest.mark.parametrize('keys', [{'SGLANG_API_KEY': API_KEY},
                                  {'SGLANG_API_KEY': API_KEY, 'SGLANG_ADMIN_API_KEY': ADMIN_KEY}],
                         ids=['api key', 'api and admin keys'])
def test_no_key_in_what_the_release_logs_serves_or_dumps(layouts_on_path, tmp_path, release, keys, launch):
    from sglang_layouts import LAYOUTS
    proc, written = start_layout(tmp_path, LAYOUTS[release], keys, launch)
    assert proc.returncode == 0, proc.stderr
    assert sorted(written) == ['crash_dump.pkl', 'report.json', 'requests.pkl']
    everything = proc.stdout + proc.stderr + repr(sorted(written.items()))
    for key in keys.values():
        assert key not in everything
        # pickle keeps a str as its UTF-8 bytes
        assert all(key.encode() not in data for data in written.values())
    report = json.loads(written['report.json'])
    # The server itself still authenticates with the real key.
    assert report['key_held'] is True
    assert report['server_info']['api_key'] in ('<hidden>', '<redacted>')
    if 'SGLANG_ADMIN_API_KEY' not in keys:
        assert report['server_info']['admin_api_key'] is None
    assert '--api-key <hidden>' in ' '.join(report['argv'])
    # The start-up line still shows the arguments, the key masked; so does the line no hook knows.
    assert 'model_path' in proc.stderr and 'a line no hook knows of: <hidden>' in proc.stderr
    if release == '0.5.23':
        assert "'api_key': '<redacted>'" in proc.stderr
        assert "--api-key <hidden>" in report['server_info']['launch_command']
    else:
        assert "api_key='<hidden>'" in proc.stderr
    # The console script's own name comes first, then its subcommand, as in `sglang serve ...`;
    # `python -m` puts the module's file first.
    if launch == 'sglang serve':
        assert report['argv'][:3] == ['sglang', 'serve', '--model-path']
    else:
        assert report['argv'][0].endswith('launch_server.py') and report['argv'][1] == '--model-path'


@pytest.mark.parametrize('launch, warned', [('python -m sglang.launch_server', True), ('sglang serve', False)])
def test_0_5_23_started_as_its_release_set_says_does_not_warn(layouts_on_path, tmp_path, launch, warned):
    from sglang_layouts import LAYOUTS
    proc, _written = start_layout(tmp_path, LAYOUTS['0.5.23'], {'SGLANG_API_KEY': API_KEY}, launch)
    assert proc.returncode == 0, proc.stderr
    assert (RECOMMEND_SERVE in proc.stderr) is warned


@pytest.mark.parametrize('layout', ['unknown ServerArgs', 'redaction with its own names', 'unknown dumps',
                                    'no ServerArgs'])
def test_a_release_it_cannot_mask_the_key_on_does_not_start(layouts_on_path, tmp_path, layout):
    from sglang_layouts import UNKNOWN_LAYOUTS
    files, why = UNKNOWN_LAYOUTS[layout]
    proc, written = start_layout(tmp_path, files, {'SGLANG_API_KEY': API_KEY})
    # 78: the unit's RestartPreventExitStatus, so that systemd does not try again and again.
    assert proc.returncode == 78
    assert 'refusing to start sglang.launch_server' in proc.stderr and why in proc.stderr
    assert 'started' not in proc.stderr + proc.stdout and not written
    assert API_KEY not in proc.stdout + proc.stderr


def test_without_a_key_nothing_is_masked_or_refused(layouts_on_path, tmp_path):
    from sglang_layouts import UNKNOWN_LAYOUTS
    files, _why = UNKNOWN_LAYOUTS['unknown dumps']
    files = dict(files, **{'sglang/launch_server.py': 'print("started")'})
    proc, _written = start_layout(tmp_path, files, {})
    assert proc.returncode == 0 and proc.stdout == 'started\n'


def test_the_unit_does_not_restart_a_launcher_that_refused():
    with open(os.path.join(ROLES, 'sglang_server', 'templates', 'sglang.service.j2')) as handle:
        unit = handle.read()
    assert 'RestartPreventExitStatus=78\n' in unit
