# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import base64
import hashlib
import os

import pytest
from record_hashes import encode_hash

from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (
    DistRecordError,
    decode_hash,
    find_distribution,
    interpreter_site_packages,
    load_record,
    normalize_name,
    parse_dist_info_dirname,
    parse_record,
    parse_site_packages,
    select_dist_info,
    venv_python,
    verify,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "anchored_patch")


def read_fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def install(site, dist_info, files):
    """A site-packages as pip leaves it: the files plus a RECORD with their sha256 and size."""
    rows = []
    for rel, data in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append("%s,%s,%d" % (rel, encode_hash("sha256", data), len(data)))
    (site / dist_info).mkdir(parents=True, exist_ok=True)
    rows.append("%s/RECORD,," % dist_info)
    (site / dist_info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.mark.parametrize("name, expected", [
    ("flashinfer-python", "flashinfer-python"),
    ("flashinfer_python", "flashinfer-python"),
    ("FlashInfer.Python", "flashinfer-python"),
    ("sgl__kernel", "sgl-kernel"),
])
def test_names_are_normalised_as_pypi_does(name, expected):
    assert normalize_name(name) == expected


@pytest.mark.parametrize("dirname, expected", [
    ("flashinfer_python-0.6.3.dist-info", ("flashinfer-python", "0.6.3")),
    ("sglang-0.5.9.dist-info", ("sglang", "0.5.9")),
    ("torch-2.9.1+cu128.dist-info", ("torch", "2.9.1+cu128")),
    ("sglang-0.5.9.egg-info", None),
    ("sglang.dist-info", None),
])
def test_dist_info_folder_names(dirname, expected):
    assert parse_dist_info_dirname(dirname) == expected


def test_the_dist_info_of_the_asked_distribution_is_picked():
    listing = ["flashinfer", "flashinfer_python-0.6.3.dist-info", "flashinfer_cubin-0.6.3.dist-info", "sglang"]
    assert select_dist_info(listing, "flashinfer-python") == "flashinfer_python-0.6.3.dist-info"
    assert select_dist_info(listing, "sgl-kernel") is None


def test_two_dist_infos_for_one_name_are_an_error_not_a_guess():
    with pytest.raises(DistRecordError, match="found 2 dist-info folders for sglang"):
        select_dist_info(["sglang-0.5.8.dist-info", "sglang-0.5.9.dist-info"], "sglang")


def test_record_rows_are_parsed_with_csv_quoting_and_unhashed_rows():
    entries = parse_record(read_fixture("RECORD.sample"))
    by_path = dict((e["path"], e) for e in entries)
    assert len(entries) == 6
    assert "flashinfer/data/include/flashinfer/odd,name.cuh" in by_path
    assert by_path["flashinfer/jit/comm.py"]["algorithm"] == "sha256"
    assert by_path["flashinfer/jit/comm.py"]["size"] == 3173
    assert base64.urlsafe_b64encode(by_path["flashinfer/jit/comm.py"]["digest"]).rstrip(b"=") \
        == b"sOyNRz3YlAludklKpptxefcPeVGfjs1CMZXo8mbgsNE"
    assert by_path["flashinfer_python-0.6.3.dist-info/RECORD"]["algorithm"] == ""
    assert by_path["flashinfer/__pycache__/__init__.cpython-311.pyc"]["size"] is None


@pytest.mark.parametrize("text, message", [
    ("a.py,sha256=abc\n", "has 2 fields"),
    ("a.py,md5sum=abc,3\n", "not supported"),
    ("a.py,sha256,3\n", "is not <algorithm>=<digest>"),
    ("a.py,sha256=c2hvcnQ,3\n", "wrong length"),
    ("a.py,sha256=%s,three\n" % encode_hash("sha256", b"x").split("=", 1)[1], "not a number"),
    ("a.py,,\na.py,,\n", "lists a.py twice"),
    (",%s,2\n" % encode_hash("sha256", b"x\n"), "empty path"),
])
def test_broken_records_are_refused_with_the_reason(text, message):
    with pytest.raises(DistRecordError, match=message):
        parse_record(text)


def test_hash_encoding_is_urlsafe_base64_without_padding():
    data = b"supported_major_versions=[9, 10]\n"
    encoded = encode_hash("sha256", data)
    assert "=" not in encoded.split("=", 1)[1]
    assert decode_hash(encoded) == ("sha256", hashlib.sha256(data).digest())


def test_verify_reports_modified_and_missing_files(tmp_path):
    install(tmp_path, "pkg-1.0.dist-info", {"pkg/a.py": b"a = 1\n", "pkg/b.py": b"b = 2\n", "pkg/c.py": b"c\n"})
    (tmp_path / "pkg/a.py").write_bytes(b"a = 2\n")
    (tmp_path / "pkg/c.py").unlink()
    dist = find_distribution([str(tmp_path)], "pkg")
    report = verify(dist["site_packages"], load_record(dist))
    assert report == {"modified": ["pkg/a.py"], "missing": ["pkg/c.py"], "checked": 3, "unhashed": 1}


def test_verify_catches_a_change_that_keeps_the_size(tmp_path):
    install(tmp_path, "pkg-1.0.dist-info", {"pkg/a.py": b"[9, 10]\n"})
    (tmp_path / "pkg/a.py").write_bytes(b"[9, 12]\n")
    dist = find_distribution([str(tmp_path)], "pkg")
    assert verify(dist["site_packages"], load_record(dist))["modified"] == ["pkg/a.py"]


def test_verify_limits_itself_to_the_asked_paths(tmp_path):
    install(tmp_path, "pkg-1.0.dist-info", {"pkg/a.py": b"a\n", "pkg/b.py": b"b\n"})
    (tmp_path / "pkg/b.py").write_bytes(b"changed\n")
    dist = find_distribution([str(tmp_path)], "pkg")
    assert verify(dist["site_packages"], load_record(dist), ["pkg/a.py"]) == {
        "modified": [], "missing": [], "checked": 1, "unhashed": 0}
    with pytest.raises(DistRecordError, match="RECORD does not list pkg/zz.py"):
        verify(dist["site_packages"], load_record(dist), ["pkg/zz.py"])


def test_find_distribution_reads_name_and_version_and_skips_absent_dirs(tmp_path):
    install(tmp_path / "site", "flashinfer_python-0.6.3.dist-info", {"flashinfer/x.py": b"x\n"})
    dist = find_distribution([str(tmp_path / "nowhere"), str(tmp_path / "site")], "flashinfer-python")
    assert (dist["name"], dist["version"]) == ("flashinfer-python", "0.6.3")
    assert find_distribution([str(tmp_path / "site")], "sglang") is None


def test_purelib_and_platlib_that_are_one_directory_count_once(tmp_path):
    install(tmp_path / "lib", "pkg-1.0.dist-info", {"pkg/a.py": b"a\n"})
    os.symlink(str(tmp_path / "lib"), str(tmp_path / "lib64"))
    dist = find_distribution([str(tmp_path / "lib"), str(tmp_path / "lib64")], "pkg")
    assert dist["version"] == "1.0"


def test_a_distribution_installed_in_two_places_is_an_error(tmp_path):
    install(tmp_path / "a", "pkg-1.0.dist-info", {"pkg/a.py": b"a\n"})
    install(tmp_path / "b", "pkg-2.0.dist-info", {"pkg/a.py": b"a\n"})
    with pytest.raises(DistRecordError, match="installed more than once"):
        find_distribution([str(tmp_path / "a"), str(tmp_path / "b")], "pkg")


@pytest.mark.parametrize("stdout, expected", [
    ('["/v/lib/python3.11/site-packages", "/v/lib/python3.11/site-packages"]\n', ["/v/lib/python3.11/site-packages"]),
    ('["/v/lib/python3.11/site-packages", "/v/lib64/python3.11/site-packages"]\n',
     ["/v/lib/python3.11/site-packages", "/v/lib64/python3.11/site-packages"]),
])
def test_site_packages_from_the_interpreter(stdout, expected):
    assert parse_site_packages(stdout) == expected


@pytest.mark.parametrize("stdout", ["", "Traceback (most recent call last):\n", "{}\n", '[""]\n'])
def test_unreadable_interpreter_output_is_an_error(stdout):
    with pytest.raises(DistRecordError):
        parse_site_packages(stdout)


def test_site_packages_are_asked_from_the_venv_interpreter():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, '["/opt/v/lib/python3.11/site-packages", "/opt/v/lib/python3.11/site-packages"]\n', ""

    python = venv_python("/opt/v/", None)
    assert interpreter_site_packages(run, python) == ["/opt/v/lib/python3.11/site-packages"]
    assert calls[0][0] == "/opt/v/bin/python"


def test_an_interpreter_that_cannot_answer_is_named_in_the_error():
    def run(argv):
        return 127, "", "No such file or directory"

    with pytest.raises(DistRecordError, match=r"/usr/bin/python9 could not report .*rc=127"):
        interpreter_site_packages(run, "/usr/bin/python9")
