# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Line-anchored edits of installed distribution files, reversible by proof.

A patch is data: per file the distribution and version it is written for, the path
relative to site-packages, and edits ``{find, replace, count, scope}``. ``find`` and
``replace`` are whole lines (several lines for a block); ``count`` is how often ``find``
must occur; ``scope`` confines the edit to the indented block that starts with a line
beginning with that text (e.g. ``def gen_trtllm_comm_module(``).

A file is in one of four states, decided against pip's RECORD, never guessed:
pristine (sha256 as RECORD says), patched (exactly the edits applied to the pristine
file), drifted (anything else), missing. Pristine content comes from the file itself,
from a pristine store written before the first edit, from undoing the edits (proven by
RECORD), or from the distribution's wheel.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import difflib
import glob
import os
import re
import shutil
import tempfile

from ansible_collections.inferops.serving.plugins.module_utils._dist_record import (
    DistRecordError,
    find_distribution,
    load_record,
    matches_entry,
    normalize_name,
    record_index,
    resolve,
)


class AnchoredPatchError(Exception):
    """The patch cannot be applied or reverted; ``problems`` lists every reason found."""

    def __init__(self, message, problems=None):
        super(AnchoredPatchError, self).__init__(message)
        self.problems = problems or []


# ---------------------------------------------------------------- text edits

def _lines(block):
    """A YAML block (``|``) ends with a newline that is not part of the anchor."""
    if block.endswith("\n"):
        block = block[:-1]
    return block.split("\n")


def validate_files(files):
    """Check the shape of a patch definition; raise AnchoredPatchError naming the bad entry."""
    problems = []
    if not files:
        problems.append("the patch lists no files")
    seen = set()
    for index, spec in enumerate(files or []):
        where = "files[%d]" % index
        for key in ("distribution", "version", "path"):
            if not isinstance(spec.get(key), str) or not spec.get(key):
                problems.append("%s.%s must be a non-empty string" % (where, key))
        key = (normalize_name(spec.get("distribution") or ""), spec.get("path"))
        if key in seen:
            problems.append("%s: %s is listed twice" % (where, spec.get("path")))
        seen.add(key)
        edits = spec.get("edits")
        if not isinstance(edits, list) or not edits:
            problems.append("%s.edits must be a non-empty list" % where)
            continue
        for number, edit in enumerate(edits):
            at = "%s.edits[%d]" % (where, number)
            if not isinstance(edit, dict):
                problems.append("%s must be a dict" % at)
                continue
            for field in ("find", "replace"):
                if not isinstance(edit.get(field), str) or not edit.get(field).strip():
                    problems.append("%s.%s must be a non-empty string" % (at, field))
            if edit.get("find") == edit.get("replace"):
                problems.append("%s: find and replace are identical" % at)
            count = edit.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                problems.append("%s.count must be a positive integer" % at)
            scope = edit.get("scope")
            if scope is not None and (not isinstance(scope, str) or not scope.strip()):
                problems.append("%s.scope must be a non-empty string when set" % at)
    if problems:
        raise AnchoredPatchError("invalid patch definition: " + "; ".join(problems), problems)


def _indent(line):
    return len(line) - len(line.lstrip(" \t"))


def scope_bounds(lines, scope):
    """(start, end) line indexes of the block opened by the line starting with ``scope``.

    The block ends before the next non-blank line indented no deeper than the opening line
    (Python's rule; it also fits a C block closed at column 0). Raises ValueError with the
    number of opening lines found when there is not exactly one.
    """
    if scope is None:
        return 0, len(lines)
    openers = [i for i, line in enumerate(lines) if line.startswith(scope)]
    if len(openers) != 1:
        raise ValueError(len(openers))
    start = openers[0]
    depth = _indent(lines[start])
    end = len(lines)
    for i in range(start + 1, len(lines)):
        if lines[i].strip() and _indent(lines[i]) <= depth:
            end = i
            break
    return start, end


def _occurrences(lines, needle, start, end):
    """Start indexes of non-overlapping matches of the line list ``needle`` in lines[start:end]."""
    found = []
    i = start
    while i + len(needle) <= end:
        if lines[i:i + len(needle)] == needle:
            found.append(i)
            i += len(needle)
        else:
            i += 1
    return found


def _found(lines, needle, hits, start, end):
    """What is there instead: the match lines, or the closest line, so a hand edit is easy to spot."""
    if hits:
        return "%d (at line %s)" % (len(hits), ", ".join(str(at + 1) for at in hits))
    at = _closest(lines, needle[0], start, end)
    if at is None:
        return "0"
    return "0 (closest: line %d %r)" % (at + 1, lines[at])


def _found_in_original(text, needle, scope, hits):
    """_found() with line numbers of the file as it is on disk, not after the earlier edits."""
    lines = _split_keepends(text)[0]
    try:
        start, end = scope_bounds(lines, scope)
    except ValueError:
        return "%d" % len(hits)
    return _found(lines, needle, _occurrences(lines, needle, start, end), start, end)


def _prefix_length(a, b):
    size = 0
    for left, right in zip(a, b):
        if left != right:
            break
        size += 1
    return size


def _closest(lines, wanted, start, end):
    """Index of the line a hand edit most likely made of ``wanted``, or None.

    An edit usually keeps the start of a line (appended comment, changed value), so the
    line sharing the longest start wins; similarity alone would pick a sibling line.
    """
    window = range(start, end)
    containing = [i for i in window if wanted.strip() and wanted.strip() in lines[i]]
    if containing:
        return containing[0]
    best = max(window, key=lambda i: _prefix_length(lines[i], wanted), default=None)
    if best is not None and _prefix_length(lines[best], wanted) * 3 >= len(wanted):
        return best
    close = difflib.get_close_matches(wanted, lines[start:end], n=1, cutoff=0.6)
    return lines.index(close[0], start, end) if close else None


def _split_keepends(text):
    """Lines without terminators plus the terminators, so that a rewrite keeps CRLF/LF as found."""
    raw = text.splitlines(True)
    bare = [line.rstrip("\r\n") for line in raw]
    ends = [line[len(b):] for line, b in zip(raw, bare)]
    return bare, ends


def _rewrite(text, edits, forward):
    """Apply (forward) or undo edits; returns (new_text, problems). Nothing is returned half done."""
    lines, ends = _split_keepends(text)
    problems = []
    for number, edit in enumerate(edits):
        old, new = _lines(edit["find"]), _lines(edit["replace"])
        if not forward:
            old, new = new, old
        expected = edit.get("count", 1)
        scope = edit.get("scope")
        try:
            start, end = scope_bounds(lines, scope)
        except ValueError as exc:
            problems.append({"edit": number, "expected": "one line starting with %r" % scope,
                             "found": "%d such lines" % exc.args[0], "text": scope})
            continue
        hits = _occurrences(lines, old, start, end)
        if len(hits) != expected:
            where = " inside %r" % scope if scope else ""
            problems.append({"edit": number, "expected": "%d x %r%s" % (expected, "\n".join(old), where),
                             "found": _found_in_original(text, old, scope, hits), "text": "\n".join(old)})
            continue
        for at in reversed(hits):
            ending = ends[at + len(old) - 1] or "\n"
            lines[at:at + len(old)] = new
            ends[at:at + len(old)] = ["\n"] * (len(new) - 1) + [ending]
    if problems:
        return None, problems
    return "".join(line + end for line, end in zip(lines, ends)), []


def apply_edits(text, edits):
    """Patched text, or AnchoredPatchError listing every anchor that is not as expected."""
    result, problems = _rewrite(text, edits, True)
    if problems:
        raise AnchoredPatchError("anchors differ", problems)
    return result


def undo_edits(text, edits):
    """The text before the edits, or None when the replacements are not exactly there."""
    result, problems = _rewrite(text, edits, False)
    return None if problems else result


def anchor_problems(text, edits):
    """What differs from the anchors the patch expects (empty list: all present as expected)."""
    return _rewrite(text, edits, True)[1]


# ---------------------------------------------------------------- files on disk

def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def atomic_write(path, data, like=None):
    """Replace ``path`` by ``data`` in one rename; mode and owner follow ``like`` (default: path)."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    reference = like or path
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if os.path.exists(reference):
            info = os.stat(reference)
            mode = info.st_mode & 0o7777
        else:
            # A file that pip would have written: plain 0644, owned like its directory.
            info = os.stat(directory)
            mode = 0o644
        os.chmod(tmp, mode)
        if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
            os.chown(tmp, info.st_uid, info.st_gid)
        os.replace(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def pristine_store_path(pristine_dir, distribution, version, relpath):
    return os.path.join(pristine_dir, "%s-%s" % (normalize_name(distribution), version),
                        os.path.normpath(relpath).lstrip(os.sep))


# ---------------------------------------------------------------- planning

def _describe(problem, spec, installed):
    return "%s (%s %s): expected %s, found %s" % (
        spec["path"], spec["distribution"], installed, problem["expected"], problem["found"])


def inspect_file(spec, search_dirs, pristine_dir, state="present"):
    """Everything known about one file of the patch, read-only.

    Returns a dict: path, full_path, distribution, installed_version, version_ok, entry,
    current (bytes or None), status (pristine | patched | drifted | missing | not_installed),
    pristine (bytes proven by RECORD, or None when not at hand), pristine_source.
    ``not_installed`` (only for state absent): the distribution, or this file in its installed
    version, is not there, so there is nothing to revert.
    """
    info = {
        "path": spec["path"],
        "distribution": spec["distribution"],
        "full_path": None,
        "installed_version": None,
        "version_ok": False,
        "entry": None,
        "current": None,
        "pristine": None,
        "pristine_source": None,
    }
    try:
        dist = find_distribution(search_dirs, spec["distribution"])
        if dist is None:
            if state == "absent":
                info["status"] = "not_installed"
                return info
            raise AnchoredPatchError("%s is not installed in %s: install it before patching %s" % (
                spec["distribution"], ", ".join(search_dirs), spec["path"]))
        entry = record_index(load_record(dist)).get(spec["path"])
    except DistRecordError as exc:
        raise AnchoredPatchError(str(exc))
    info.update(installed_version=dist["version"], version_ok=dist["version"] == spec["version"])
    if entry is None or not entry["algorithm"]:
        if state == "absent" and not info["version_ok"]:
            info["status"] = "not_installed"
            return info
        raise AnchoredPatchError("the RECORD of %s %s has no hash for %s: the path is wrong for this version" % (
            spec["distribution"], dist["version"], spec["path"]))
    info.update(entry=entry, full_path=resolve(dist["site_packages"], spec["path"]))
    current = read_bytes(info["full_path"])
    info["current"] = current
    if current is not None and matches_entry(entry, current):
        info.update(status="pristine", pristine=current, pristine_source="installed file")
        return info
    stored = read_bytes(pristine_store_path(pristine_dir, spec["distribution"], dist["version"], spec["path"]))
    if stored is not None and matches_entry(entry, stored):
        info.update(pristine=stored, pristine_source="pristine store")
    if current is None:
        info["status"] = "missing"
        return info
    info["status"] = "drifted"
    if not info["version_ok"]:
        return info
    try:
        text = current.decode("utf-8")
    except UnicodeDecodeError:
        return info
    if info["pristine"] is None:
        undone = undo_edits(text, spec["edits"])
        if undone is not None and matches_entry(entry, undone.encode("utf-8")):
            info.update(pristine=undone.encode("utf-8"), pristine_source="undoing the edits")
    if info["pristine"] is not None:
        try:
            expected = apply_edits(info["pristine"].decode("utf-8"), spec["edits"]).encode("utf-8")
        except (AnchoredPatchError, UnicodeDecodeError):
            expected = None
        if expected == current:
            info["status"] = "patched"
    return info


def plan(files, state, search_dirs, pristine_dir):
    """Inspect every file and decide what to do; raises before anything is written.

    Returns a list of inspected file dicts, each with ``action`` (none | patch | restore)
    and, for ``patch``, the ``new`` bytes.
    """
    validate_files(files)
    inspected = [inspect_file(spec, search_dirs, pristine_dir, state) for spec in files]
    problems = []
    for spec, info in zip(files, inspected):
        info["action"] = "none"
        if state == "absent":
            if info["status"] not in ("pristine", "not_installed"):
                info["action"] = "restore"
            continue
        if not info["version_ok"]:
            problems.append("%s: the patch is written for %s %s, but %s is installed; pin %s to %s "
                            "or turn the patch off" % (spec["path"], spec["distribution"], spec["version"],
                                                       info["installed_version"], spec["distribution"],
                                                       spec["version"]))
            continue
        if info["status"] == "patched":
            continue
        if info["status"] == "missing":
            problems.append("%s (%s %s) is missing from %s" % (
                spec["path"], spec["distribution"], info["installed_version"], info["full_path"]))
            continue
        text = info["current"].decode("utf-8", "replace")
        found = anchor_problems(text, spec["edits"])
        if info["status"] == "drifted":
            detail = "; ".join(_describe(p, spec, info["installed_version"]) for p in found)
            problems.append("%s differs from the file pip installed (RECORD sha256) and from its patched form: "
                            "hand edit or foreign patch; revert it (patch off) first%s" % (
                                info["full_path"], " [" + detail + "]" if detail else ""))
            continue
        if found:
            problems.extend(_describe(p, spec, info["installed_version"]) for p in found)
            continue
        info["action"] = "patch"
        info["new"] = apply_edits(text, spec["edits"]).encode("utf-8")
    if problems:
        raise AnchoredPatchError("nothing was changed: " + " | ".join(problems), problems)
    return inspected


def stale_paths(patterns):
    """Existing paths that match the glob patterns, sorted, without duplicates."""
    found = set()
    for pattern in patterns or []:
        found.update(glob.glob(pattern))
    return sorted(found)


def stale_matches(rules):
    """Paths matching a rule's glob that hold a file whose content matches the rule's regex.

    ``rules``: ``[{'path': glob, 'contains': regex}]``. Finds builds made from the other patch
    state that outlived it, for example when a revert was interrupted before its clean-up.
    """
    found = set()
    for rule in rules or []:
        try:
            regex = re.compile(rule["contains"])
        except re.error as exc:
            raise AnchoredPatchError("stale rule %r: invalid regex: %s" % (rule["contains"], exc))
        for path in glob.glob(rule["path"]):
            candidates = [path] if os.path.isfile(path) else [
                os.path.join(root, name) for root, _dirs, names in os.walk(path) for name in names]
            for candidate in candidates:
                try:
                    with open(candidate, "rb") as handle:
                        text = handle.read().decode("utf-8", "replace")
                except (IOError, OSError):
                    continue
                if regex.search(text):
                    found.add(path)
                    break
    return sorted(found)


def removals(inspected, invalidate=None, stale=None):
    """What execute() would remove: invalidated paths when a file changes, stale builds always."""
    changing = any(info["action"] != "none" for info in inspected)
    return sorted(set((stale_paths(invalidate) if changing else []) + stale_matches(stale)))


def execute(inspected, pristine_dir, invalidate=None, fetch_pristine=None, stale=None):
    """Carry out a plan. Derived build folders go first: an interrupted run leaves no stale build.

    ``fetch_pristine(info)`` returns the pristine bytes of a file when neither the file,
    the store nor undoing the edits has them (e.g. from the wheel); it must be proven here.
    Returns the removed paths.
    """
    todo = [info for info in inspected if info["action"] != "none"]
    removed = removals(inspected, invalidate, stale)
    if not todo and not removed:
        return []
    for info in todo:
        if info["action"] == "restore" and info["pristine"] is None:
            data = fetch_pristine(info) if fetch_pristine else None
            if data is None or not matches_entry(info["entry"], data):
                raise AnchoredPatchError(
                    "no pristine copy of %s (%s %s) matches its RECORD sha256; reinstall %s" % (
                        info["path"], info["distribution"], info["installed_version"], info["distribution"]))
            info.update(pristine=data, pristine_source="wheel")
    for path in removed:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    for info in todo:
        if info["action"] == "patch":
            store = pristine_store_path(pristine_dir, info["distribution"], info["installed_version"], info["path"])
            if read_bytes(store) != info["pristine"]:
                atomic_write(store, info["pristine"], like=info["full_path"])
            atomic_write(info["full_path"], info["new"])
        else:
            atomic_write(info["full_path"], info["pristine"])
    return removed
