"""The collection as a user gets it: built, installed, and used by FQCN from outside the checkout."""
import json
import os
import subprocess
import sys
import tarfile
import textwrap

import pytest

from ansible_collections.inferops.serving.tests.utils.playbook import run_playbook

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
ROLES = ("gpu_vm", "sglang", "sglang_server")
SEED_TOPOLOGY = os.path.join(
    REPO_ROOT, "molecule", "resources", "lab", "sim", "nvidia-smi")


def _run(args, cwd, env=None):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("collection")
    install_root = work / "collections"
    # A clean environment: no ansible.cfg from the checkout and no link to it, only the installed copy.
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    empty_config = work / "ansible.cfg"
    empty_config.write_text("[defaults]\n")
    env.update({
        "ANSIBLE_CONFIG": str(empty_config),
        "ANSIBLE_COLLECTIONS_PATH": str(install_root),
        "ANSIBLE_NOCOLOR": "1",
    })
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(work), REPO_ROOT],
         cwd=str(work), env=env)
    tarballs = [name for name in os.listdir(work) if name.endswith(".tar.gz")]
    assert len(tarballs) == 1, tarballs
    tarball = os.path.join(work, tarballs[0])
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "-p", str(install_root), tarball],
         cwd=str(work), env=env)
    assert (install_root / "ansible_collections" / "inferops" / "serving" / "MANIFEST.json").is_file()

    return {"tarball": tarball, "root": install_root, "env": env, "work": work}


def test_tarball_ships_the_collection_and_leaves_out_development_files(installed):
    with tarfile.open(installed["tarball"]) as archive:
        names = archive.getnames()
    assert "MANIFEST.json" in names
    assert "plugins/modules/nccl_topology.py" in names
    for role in ROLES:
        assert f"roles/{role}/tasks/main.yml" in names
        assert f"roles/{role}/meta/argument_specs.yml" in names
    leaked = [n for n in names if n.split("/")[0] in {"molecule", "tests", ".venv", ".collections", ".git", "build"}]
    assert leaked == []


def test_installed_module_runs_by_fqcn_from_outside_the_checkout(installed, tmp_path):
    # Offline analysis of a support bundle: the lab's nvidia-smi replays the seed's VM.
    matrix = tmp_path / "topo-m.txt"
    p2p = tmp_path / "p2p-r.txt"
    for path, argv in ((matrix, ["topo", "-m"]), (p2p, ["topo", "-p2p", "r"])):
        out = _run([sys.executable, SEED_TOPOLOGY] + argv, cwd=str(tmp_path)).stdout
        path.write_text(out)
    playbook = tmp_path / "site.yml"
    playbook.write_text(textwrap.dedent(f"""\
        - hosts: localhost
          gather_facts: false
          tasks:
            - inferops.serving.nccl_topology:
                topo_matrix_file: {matrix}
                p2p_read_file: {p2p}
              register: topo
    """))
    result = run_playbook(["-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
                           str(playbook)], env=installed["env"], cwd=str(tmp_path))
    assert result.returncode == 0, result.summary
    facts = result.tasks("localhost")["inferops.serving.nccl_topology"]["ansible_facts"]["nccl_topology"]
    assert facts["gpu_count"] == 8
    assert facts["all_pairs_p2p"] is False
    assert facts["allreduce_fusion_advised"] is False


@pytest.mark.parametrize("role", ROLES)
def test_installed_roles_resolve_by_fqcn_with_their_argument_specs(installed, role):
    result = _run([os.path.join(BIN, "ansible-doc"), "-t", "role", "--json", f"inferops.serving.{role}"],
                  cwd=str(installed["work"]), env=installed["env"])
    doc = json.loads(result.stdout)[f"inferops.serving.{role}"]
    options = doc["entry_points"]["main"]["options"]
    assert options, f"role {role} documents no options"
    assert all(name.startswith(role + "_") for name in options), sorted(options)


def test_installed_role_rejects_bad_input_before_running(installed, tmp_path):
    playbook = tmp_path / "bad.yml"
    playbook.write_text(textwrap.dedent("""\
        - hosts: localhost
          gather_facts: false
          roles:
            - role: inferops.serving.gpu_vm
              gpu_vm_expected_gpu_count: many
    """))
    result = run_playbook(["-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
                           str(playbook)], env=installed["env"], cwd=str(tmp_path))
    assert result.returncode != 0
    assert result.recap["localhost"].changed == 0, result.summary
    failures = result.failures("localhost")
    assert len(failures) == 1 and "gpu_vm_expected_gpu_count" in failures[0], result.summary
    assert "argument spec" in failures[0].lower() or "validation" in failures[0].lower(), result.summary
