# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read pip's RECORD of an installed distribution and prove files against it.

pip writes ``<name>-<version>.dist-info/RECORD`` (PEP 376 / PEP 627): one CSV row per
installed file, ``path,algorithm=<urlsafe base64 digest without padding>,size``. Rows for
RECORD itself and for files written after install (``.pyc``) carry no hash. Paths are
relative to the site-packages directory that holds the dist-info folder.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import base64
import csv
import hashlib
import io
import json
import os
import re


class DistRecordError(Exception):
    """The distribution or its RECORD cannot be read as pip wrote it."""


def normalize_name(name):
    """PEP 503 normalisation: ``Flashinfer_Python`` and ``flashinfer-python`` are one name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_dist_info_dirname(dirname):
    """Split ``flashinfer_python-0.6.3.dist-info`` into (normalised name, version); None otherwise."""
    if not dirname.endswith(".dist-info"):
        return None
    stem = dirname[:-len(".dist-info")]
    if "-" not in stem:
        return None
    name, version = stem.rsplit("-", 1)
    if not name or not version:
        return None
    return normalize_name(name), version


def select_dist_info(dirnames, distribution):
    """Pick the single dist-info folder name of ``distribution`` from a directory listing.

    Returns None when the distribution is not installed. Two dist-info folders for one
    name mean an interrupted or broken install; that is an error, not a guess.
    """
    wanted = normalize_name(distribution)
    matches = sorted(d for d in dirnames if (parse_dist_info_dirname(d) or (None,))[0] == wanted)
    if len(matches) > 1:
        raise DistRecordError(
            "found %d dist-info folders for %s (%s): reinstall the distribution so that pip "
            "leaves exactly one" % (len(matches), distribution, ", ".join(matches)))
    return matches[0] if matches else None


def decode_hash(value):
    """``sha256=<b64>`` -> (algorithm, raw digest bytes); ('', b'') for an empty field."""
    if not value:
        return "", b""
    if "=" not in value:
        raise DistRecordError("hash field %r is not <algorithm>=<digest>" % value)
    algorithm, encoded = value.split("=", 1)
    if algorithm not in hashlib.algorithms_guaranteed:
        raise DistRecordError("hash algorithm %r is not supported" % algorithm)
    try:
        digest = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (ValueError, TypeError) as exc:
        raise DistRecordError("hash field %r is not urlsafe base64: %s" % (value, exc))
    if len(digest) != hashlib.new(algorithm).digest_size:
        raise DistRecordError("hash field %r has the wrong length for %s" % (value, algorithm))
    return algorithm, digest


def parse_record(text):
    """RECORD text -> ordered dict-like list of entries.

    Each entry: ``{'path': str, 'algorithm': str, 'digest': bytes, 'size': int or None}``;
    algorithm is '' for rows without a hash.
    """
    entries = []
    seen = set()
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not any(field.strip() for field in row):
            continue
        if len(row) != 3:
            raise DistRecordError("RECORD line %d has %d fields, expected 3: %r" % (lineno, len(row), row))
        path, hash_field, size_field = row
        if not path:
            raise DistRecordError("RECORD line %d has an empty path" % lineno)
        algorithm, digest = decode_hash(hash_field)
        size = None
        if size_field:
            try:
                size = int(size_field)
            except ValueError:
                raise DistRecordError("RECORD line %d has a size that is not a number: %r" % (lineno, size_field))
        if path in seen:
            raise DistRecordError("RECORD lists %s twice" % path)
        seen.add(path)
        entries.append({"path": path, "algorithm": algorithm, "digest": digest, "size": size})
    return entries


def record_index(entries):
    """path -> entry, for lookups of single files."""
    return dict((entry["path"], entry) for entry in entries)


def matches_entry(entry, data):
    """True when ``data`` (bytes) is exactly the file pip installed for ``entry``."""
    if not entry["algorithm"]:
        raise DistRecordError("RECORD has no hash for %s: it cannot be proven" % entry["path"])
    if entry["size"] is not None and entry["size"] != len(data):
        return False
    return hashlib.new(entry["algorithm"], data).digest() == entry["digest"]


def resolve(site_packages, relpath):
    """Absolute path of a RECORD path (which may climb out of site-packages, e.g. to bin/)."""
    return os.path.normpath(os.path.join(site_packages, relpath))


def _file_digest(path, algorithm):
    hasher = hashlib.new(algorithm)
    size = 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1024 * 1024), b""):
            hasher.update(chunk)
            size += len(chunk)
    return hasher.digest(), size


def verify(site_packages, entries, paths=None):
    """Compare installed files with RECORD.

    ``paths``: RECORD paths to check (None = every hashed entry). A requested path that
    RECORD does not list is an error: the caller named a file this distribution does not own.
    Returns ``{'modified': [...], 'missing': [...], 'checked': int, 'unhashed': int}``.
    """
    index = record_index(entries)
    if paths is None:
        selected = entries
    else:
        unknown = [p for p in paths if p not in index]
        if unknown:
            raise DistRecordError("RECORD does not list %s" % ", ".join(sorted(unknown)))
        selected = [index[p] for p in paths]
    modified, missing = [], []
    checked = unhashed = 0
    for entry in selected:
        if not entry["algorithm"]:
            unhashed += 1
            continue
        checked += 1
        full = resolve(site_packages, entry["path"])
        if not os.path.isfile(full):
            missing.append(entry["path"])
            continue
        digest, size = _file_digest(full, entry["algorithm"])
        if digest != entry["digest"] or (entry["size"] is not None and size != entry["size"]):
            modified.append(entry["path"])
    return {"modified": sorted(modified), "missing": sorted(missing), "checked": checked, "unhashed": unhashed}


def find_distribution(search_dirs, distribution):
    """Locate an installed distribution in the given site-packages directories.

    Returns ``{'site_packages', 'dist_info', 'name', 'version'}`` or None when it is not installed.
    """
    found = []
    for directory in search_dirs:
        if not os.path.isdir(directory):
            continue
        dirname = select_dist_info(os.listdir(directory), distribution)
        if dirname:
            found.append((directory, dirname))
    unique = []
    for directory, dirname in found:
        real = os.path.realpath(os.path.join(directory, dirname))
        if real not in [os.path.realpath(os.path.join(d, n)) for d, n in unique]:
            unique.append((directory, dirname))
    if len(unique) > 1:
        raise DistRecordError("%s is installed more than once: %s" % (
            distribution, ", ".join(os.path.join(d, n) for d, n in unique)))
    if not unique:
        return None
    directory, dirname = unique[0]
    name, version = parse_dist_info_dirname(dirname)
    return {"site_packages": directory, "dist_info": os.path.join(directory, dirname),
            "name": name, "version": version}


def load_record(dist):
    """Parse the RECORD of a distribution returned by find_distribution."""
    record_path = os.path.join(dist["dist_info"], "RECORD")
    try:
        with open(record_path, "r", encoding="utf-8") as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        raise DistRecordError("cannot read %s: %s" % (record_path, exc))
    return parse_record(text)


# The interpreter knows its own site-packages; asking it beats guessing lib/python3.X paths.
SITE_PACKAGES_SCRIPT = (
    "import json, sysconfig; "
    "print(json.dumps([sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))"
)


def parse_site_packages(stdout):
    """Output of SITE_PACKAGES_SCRIPT -> list of distinct directories."""
    try:
        paths = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise DistRecordError("the interpreter did not report its site-packages: %r" % stdout)
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise DistRecordError("the interpreter reported unexpected site-packages: %r" % stdout)
    unique = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


def venv_python(venv, python):
    """The interpreter the modules' venv/python options name."""
    if venv:
        return venv.rstrip("/") + "/bin/python"
    return python


def interpreter_site_packages(run, python):
    """Site-packages folders of ``python``, asked from the interpreter itself.

    ``run(argv)`` runs a command and returns ``(rc, stdout, stderr)``, as
    ``AnsibleModule.run_command`` does.
    """
    rc, stdout, stderr = run([python, "-c", SITE_PACKAGES_SCRIPT])
    if rc != 0:
        raise DistRecordError("%s could not report its site-packages (rc=%s): %s" % (python, rc, stderr.strip()))
    return parse_site_packages(stdout)
