"""The execution environment: docs/execution-environment/ as ansible-builder reads it, and the collection's
own EE metadata (meta/execution-environment.yml) as ansible-builder finds it in an installed copy."""
import ast
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
EXAMPLE = os.path.join(REPO_ROOT, "docs", "execution-environment")
# Import name -> the distribution that provides it, for the packages meta/ee-requirements.txt may list.
DISTRIBUTIONS = {"yaml": "PyYAML"}


def _run(args, cwd):
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _read_yaml(*parts):
    with open(os.path.join(*parts)) as handle:
        return yaml.safe_load(handle)


def _requirement_names(path):
    with open(path) as handle:
        lines = [line.split("#", 1)[0].strip() for line in handle]
    return {re.split(r"[\s<>=!~;\[]", line, maxsplit=1)[0].lower() for line in lines if line}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The example copied as a user has it after the collection's build, and the context ansible-builder creates."""
    work = tmp_path_factory.mktemp("ee")
    definition_dir = work / "execution-environment"
    shutil.copytree(EXAMPLE, definition_dir)
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(definition_dir), REPO_ROOT],
         cwd=str(work))
    context = work / "context"
    _run([os.path.join(BIN, "ansible-builder"), "create", "--file", "execution-environment.yml",
          "--context", str(context), "--output-filename", "Containerfile"], cwd=str(definition_dir))
    return {"work": work, "context": context}


def test_the_context_installs_the_built_collection(built):
    version = _read_yaml(REPO_ROOT, "galaxy.yml")["version"]
    tarball = f"collections/inferops-serving-{version}.tar.gz"
    assert (built["context"] / "_build" / tarball).is_file(), sorted(os.listdir(built["context"] / "_build"))
    requirements = _read_yaml(built["context"], "_build", "requirements.yml")
    assert requirements["collections"] == [{"name": tarball, "type": "file"}]
    containerfile = (built["context"] / "Containerfile").read_text()
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    # The collection's own requirements are read from the installed copy at build time.
    assert "introspect.py introspect" in containerfile


def test_the_image_runs_the_ansible_core_that_make_tests(built):
    with open(os.path.join(REPO_ROOT, "requirements.txt")) as handle:
        pinned = re.search(r"^ansible-core==(\S+)$", handle.read(), re.MULTILINE).group(1)
    containerfile = (built["context"] / "Containerfile").read_text()
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"$', containerfile, re.MULTILINE).group(1).split()
    assert f"ansible-core=={pinned}" in refs
    assert any(ref.startswith("ansible-runner==") for ref in refs), refs
    # ansible-core 2.19 needs Python 3.11 or later on the controller.
    python = re.search(r'^ARG PYCMD="([^"]*)"$', containerfile, re.MULTILINE).group(1)
    minor = int(re.search(r"python3\.(\d+)$", python).group(1))
    assert minor >= 11, python


def test_ansible_builder_finds_the_collections_system_requirements(built):
    root = built["work"] / "installed"
    tarball = next((built["context"] / "_build" / "collections").glob("*.tar.gz"))
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "-p", str(root), str(tarball)],
         cwd=str(built["work"]))
    output = _run([os.path.join(BIN, "ansible-builder"), "introspect", str(root)], cwd=str(built["work"])).stdout
    found = yaml.safe_load(output.split("\n", 1)[1])
    assert "openssh-clients [platform:rpm]  # from collection inferops.serving" in found["system"]
    assert "openssh-client [platform:dpkg]  # from collection inferops.serving" in found["system"]


def test_every_package_the_plugins_import_is_declared_for_the_ee():
    """Filter and action plugins run in the EE, and so do modules run on localhost: a module-level
    import beyond the standard library and ansible-core must be in meta/ee-requirements.txt."""
    declared = _requirement_names(os.path.join(REPO_ROOT, "meta", "ee-requirements.txt"))
    missing = []
    for folder, _dirs, files in os.walk(os.path.join(REPO_ROOT, "plugins")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path) as handle:
                tree = ast.parse(handle.read())
            for statement in tree.body:
                for node in ast.walk(statement) if isinstance(statement, ast.Try) else [statement]:
                    if isinstance(node, ast.Import):
                        modules = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0:
                        modules = [node.module]
                    else:
                        continue
                    for module in modules:
                        top = module.split(".")[0]
                        if top in sys.stdlib_module_names or top in ("ansible", "ansible_collections"):
                            continue
                        if DISTRIBUTIONS.get(top, top).lower() not in declared:
                            missing.append(f"{os.path.relpath(path, REPO_ROOT)} imports {module}")
    assert missing == [], "add their distributions to meta/ee-requirements.txt (and DISTRIBUTIONS here): " + \
        "; ".join(missing)
