"""State of a lab node after the sglang role and the patch lifecycle (which ends with the patch off)."""
import json
import re

import pytest

VENVS = "/opt/sglang/venvs"
STATE_DIR = "/var/lib/sglang"
PATCHED = {
    "sglang": ["sglang/srt/layers/communicator.py", "sglang/srt/server_args.py"],
    "flashinfer-python": [
        "flashinfer/jit/comm.py",
        "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh",
    ],
}

# Proves files against RECORD with nothing but the standard library, independently of the
# collection's module: {"<path>": "ok" | "modified" | "missing"}.
RECORD_CHECK = r"""
import base64, csv, hashlib, importlib.metadata as md, json, os, sys
dist = md.distribution(sys.argv[1])
rows = {r[0]: r[1] for r in csv.reader(dist.read_text("RECORD").splitlines()) if r}
out = {}
for rel in sys.argv[2:]:
    path = str(dist.locate_file(rel))
    if not os.path.exists(path):
        out[rel] = "missing"
        continue
    algo, digest = rows[rel].split("=", 1)
    mine = base64.urlsafe_b64encode(hashlib.new(algo, open(path, "rb").read()).digest()).rstrip(b"=").decode()
    out[rel] = "ok" if mine == digest else "modified"
print(json.dumps(out))
"""


@pytest.fixture
def venv(host):
    """The venv of the default release set (the side effect installed 0.5.23 beside it, and went back)."""
    found = host.check_output(f"ls -d {VENVS}/0.5.9-*").split()
    assert len(found) == 1, found
    return found[0]


def _installed(host, venv):
    out = host.check_output(f"{venv}/bin/pip list --format=json --disable-pip-version-check")
    return {p["name"].lower(): p["version"] for p in json.loads(out)}


def test_pinned_versions_installed(host, venv):
    installed = _installed(host, venv)
    assert installed.get("sglang") == "0.5.9"
    assert installed.get("flashinfer-python") == "0.6.3"


def test_flashinfer_jit_cache_not_installed(host, venv):
    assert "flashinfer-jit-cache" not in _installed(host, venv)


def test_constraints_file_pins_every_version(host, venv):
    constraints = host.file(f"{venv}/inferops-constraints.txt")
    assert constraints.exists
    assert constraints.user == "sglang"
    lines = {line for line in constraints.content_string.splitlines() if line and not line.startswith("#")}
    assert lines == {
        "sglang==0.5.9",
        "flashinfer-python==0.6.3",
        "flashinfer-cubin==0.6.3",
        "sgl-kernel==0.3.21",
        "torch==2.9.1",
    }


@pytest.mark.parametrize("distribution", sorted(PATCHED))
def test_patch_off_leaves_files_as_pip_installed(host, venv, distribution):
    paths = PATCHED[distribution]
    cmd = host.run(f"{venv}/bin/python -c %s %s" + " %s" * len(paths), RECORD_CHECK, distribution, *paths)
    assert cmd.rc == 0, cmd.stderr
    assert json.loads(cmd.stdout) == {path: "ok" for path in paths}


def test_restored_files_still_belong_to_the_service_user(host, venv):
    site = host.check_output(f"{venv}/bin/python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'")
    for paths in PATCHED.values():
        for rel in paths:
            restored = host.file(f"{site}/{rel}")
            assert restored.user == "sglang", rel
            assert restored.mode == 0o644, rel


def test_no_trtllm_comm_jit_build_survives(host):
    found = host.run(f"find {STATE_DIR}/.cache/flashinfer -path '*/cached_ops/trtllm_comm' -print")
    assert found.rc == 0
    assert found.stdout.strip() == ""


def test_pristine_store_holds_the_patched_files(host):
    for distribution, version in (("sglang", "0.5.9"), ("flashinfer-python", "0.6.3")):
        for rel in PATCHED[distribution]:
            assert host.file(f"{STATE_DIR}/pristine/{distribution}-{version}/{rel}").is_file, rel


@pytest.mark.parametrize("path", [STATE_DIR, f"{STATE_DIR}/huggingface"])
def test_service_caches_belong_to_the_service_user(host, path):
    cache = host.file(path)
    assert cache.is_directory
    assert cache.user == "sglang"
    assert cache.mode == 0o750


def test_venv_belongs_to_the_service_user(host, venv):
    user = host.user('sglang')
    assert user.exists
    assert user.shell in ('/usr/sbin/nologin', '/sbin/nologin')
    assert user.home == '/var/lib/sglang'
    assert user.uid < 1000  # system user
    for path in (venv, venv + '/bin/pip', venv + '/pyvenv.cfg', venv + '/lib'):
        assert host.file(path).user == 'sglang', path
    # Built on the system interpreter, not a copy in /root.
    cfg = host.file(venv + '/pyvenv.cfg').content_string
    assert re.search(r'^home = /usr/bin$', cfg, re.M)
    assert not host.file('/root/ml-env').exists


def test_venv_has_pinned_pip_and_wheel(host, venv):
    freeze = host.check_output(venv + '/bin/python -m pip list --format=freeze')
    assert 'pip==25.3' in freeze.splitlines()
    assert 'wheel==0.45.1' in freeze.splitlines()


def test_the_venvs_folder_is_root_s_and_holds_what_the_last_prune_kept(host):
    folder = host.file(VENVS)
    assert folder.user == "root" and folder.mode == 0o755
    names = sorted(host.check_output(f"ls -A {VENVS}").split())
    # The side effect installed 0.5.23 beside 0.5.9, went back, and pruned to one venv.
    assert [re.sub(r"-[0-9a-f]{8}$", "", name) for name in names] == ["0.5.9"], names
