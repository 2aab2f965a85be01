# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import sys

import pytest

from record_hashes import encode_hash
from ansible_collections.inferops.serving.plugins.modules import dist_integrity
from ansible_collections.inferops.serving.tests.utils.module_result import run_in_process


def run(args, capsys):
    return run_in_process(dist_integrity.main, args, capsys)


@pytest.fixture
def site(tmp_path):
    files = {"flashinfer/jit/comm.py": b"supported_major_versions=[9, 10]\n", "flashinfer/__init__.py": b""}
    rows = []
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
        rows.append("%s,%s,%d" % (rel, encode_hash("sha256", data), len(data)))
    (tmp_path / "flashinfer_python-0.6.3.dist-info").mkdir()
    (tmp_path / "flashinfer_python-0.6.3.dist-info" / "RECORD").write_text(
        "\n".join(rows + ["flashinfer_python-0.6.3.dist-info/RECORD,,"]) + "\n")
    return tmp_path


def test_a_pristine_distribution(site, capsys):
    result = run({"name": "flashinfer_python", "site_packages": str(site)}, capsys)
    assert result["changed"] is False
    assert (result["installed"], result["pristine"], result["version"]) == (True, True, "0.6.3")
    assert (result["checked"], result["unhashed"], result["modified"], result["missing"]) == (2, 1, [], [])


def test_an_edited_file_is_listed(site, capsys):
    (site / "flashinfer/jit/comm.py").write_bytes(b"supported_major_versions=[9, 10, 12]\n")
    result = run({"name": "flashinfer-python", "site_packages": str(site)}, capsys)
    assert result["modified"] == ["flashinfer/jit/comm.py"]
    assert result["pristine"] is False


def test_fail_on_modified_names_the_file(site, capsys):
    (site / "flashinfer/__init__.py").unlink()
    result = run({"name": "flashinfer-python", "site_packages": str(site), "fail_on_modified": True}, capsys)
    assert result["failed"] is True
    assert "missing flashinfer/__init__.py" in result["msg"]


def test_a_distribution_that_is_not_installed(site, capsys):
    result = run({"name": "sglang", "site_packages": str(site)}, capsys)
    assert result["installed"] is False and result["pristine"] is False and "failed" not in result


def test_a_path_outside_the_record_fails(site, capsys):
    result = run({"name": "flashinfer-python", "site_packages": str(site), "paths": ["flashinfer/nope.py"]}, capsys)
    assert result["failed"] is True and "RECORD does not list flashinfer/nope.py" in result["msg"]


def test_the_interpreter_is_asked_for_its_site_packages(capsys):
    result = run({"name": "pytest", "python": sys.executable, "paths": ["pytest/__init__.py"]}, capsys)
    assert result["installed"] is True
    assert result["version"] == pytest.__version__
    assert result["checked"] == 1
