#!/usr/bin/env bash
# Prints the path of a CPython that ansible-core 2.20 and 2.21 accept as a controller (3.12 to
# 3.14), the newest found first. Debian 12's python3 is 3.11, too old for them: the candidates are
# $CORE_MATRIX_PYTHON, python3.14/3.13/3.12 on PATH, then pyenv's installed versions. pyenv's
# shims are on PATH but fail for a version that is not selected, so each candidate is run.
# Fails, saying where it looked, when none is usable: the version matrix is never skipped.
set -euo pipefail

MINOR_VERSIONS=(14 13 12)

usable() {
  "$1" -c 'import sys, venv, ensurepip; sys.exit(not ((3, 12) <= sys.version_info[:2] <= (3, 14)))' \
    >/dev/null 2>&1
}

candidates=()
if [[ -n "${CORE_MATRIX_PYTHON:-}" ]]; then
  usable "$CORE_MATRIX_PYTHON" || {
    echo "CORE_MATRIX_PYTHON=$CORE_MATRIX_PYTHON is not a CPython 3.12 to 3.14 with venv and ensurepip" >&2
    exit 1
  }
  candidates+=("$CORE_MATRIX_PYTHON")
fi
for minor in "${MINOR_VERSIONS[@]}"; do
  if path=$(command -v "python3.$minor" 2>/dev/null); then
    candidates+=("$path")
  fi
done
pyenv_roots=("${PYENV_ROOT:-}" "$HOME/.pyenv")
for minor in "${MINOR_VERSIONS[@]}"; do
  for root in "${pyenv_roots[@]}"; do
    [[ -n "$root" ]] || continue
    # Newest patch release first.
    while IFS= read -r path; do
      candidates+=("$path")
    done < <(find "$root/versions" -mindepth 3 -maxdepth 3 -path "*/3.$minor.*/bin/python3.$minor" 2>/dev/null | sort -rV)
  done
done

for path in "${candidates[@]}"; do
  if usable "$path"; then
    echo "$path"
    exit 0
  fi
done

cat >&2 <<EOF
No Python 3.12 to 3.14 found for ansible-core 2.20 and 2.21 (Debian 12's python3 is 3.11).
Looked for: \$CORE_MATRIX_PYTHON, python3.14, python3.13 and python3.12 on PATH, and
${PYENV_ROOT:-\$PYENV_ROOT}/versions/3.1[234].*/bin and $HOME/.pyenv/versions/3.1[234].*/bin.
Install one (e.g. 'pyenv install 3.13') or name it: make CORE_MATRIX_PYTHON=/path/to/python3.13 ...
EOF
exit 1
