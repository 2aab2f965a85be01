"""Run a test file's module as Ansible does: the module file with a JSON arguments file."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.tests.utils.module_result import as_shown

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


@pytest.fixture
def run_module(tmp_path, request):
    """Callable running the module file named by the test file's MODULE with the given arguments; its
    result as the controller shows it (tests/utils/module_result.py)."""
    def run(**args):
        args_file = tmp_path / "args.json"
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO_ROOT, ".collections")] + sys.path))
        proc = subprocess.run([sys.executable, request.module.MODULE, str(args_file)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        assert "Traceback" not in proc.stdout + proc.stderr
        return as_shown(json.loads(proc.stdout))
    return run


@pytest.fixture
def sglang_venv(tmp_path):
    """Callable making a venv whose site-packages holds the real SGLang sources of one release."""
    def install(version):
        release = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "sglang", version)
        site = tmp_path / ("venv-%s" % version) / "lib" / "python3.11" / "site-packages"
        for folder, _dirs, files in os.walk(release):
            for name in files:
                target = site / os.path.relpath(os.path.join(folder, name), release)[:-len(".txt")]
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(os.path.join(folder, name), "rb") as handle:
                    target.write_bytes(handle.read())
        (site / ("sglang-%s.dist-info" % version)).mkdir()
        return str(tmp_path / ("venv-%s" % version))
    return install
