#!/usr/bin/env bash
# Runs molecule scenarios, JOBS at a time, each in its own Ansible home (molecule installs the
# collection there, so two scenarios never write one copy at once) with its log in LOG_DIR.
# Prints one line per finished scenario with its duration; a failed scenario's log is printed
# whole, and the run exits non-zero once the running ones have finished.
#
# Usage: run-scenarios.sh JOBS SCENARIO...   (a SCENARIO is molecule/<name> or tests/<name>)
#   LOG_DIR      where the per-scenario logs go (default build/molecule-logs)
#   KEEP_GOING   1: start the remaining scenarios after a failure too (default: stop starting them)
set -uo pipefail

jobs=${1:?usage: run-scenarios.sh JOBS SCENARIO...}
shift
log_dir=${LOG_DIR:-build/molecule-logs}
mkdir -p "$log_dir"
homes=$(mktemp -d "${TMPDIR:-/tmp}/inferops-molecule.XXXXXX")
trap 'rm -rf "$homes"' EXIT

# A scenario is molecule/<name>, or tests/<name> for the checks that drive the lab node through
# the README's own commands (pytest, outside molecule). A scenario whose nodes start from the
# baked lab image bakes it first, in its own slot while the others run (bake-image.sh bakes once:
# a second caller waits for the bake under way and finds the image up to date).
run_one() {
  local scenario=$1 start rc what
  start=$(date +%s)
  if [[ -d "molecule/$scenario" ]]; then
    what="molecule test -s $scenario"
    : >"$log_dir/$scenario.log"
    if grep -q LAB_BAKED_IMAGE "molecule/$scenario/molecule.yml"; then
      molecule/resources/lab/bake-image.sh >>"$log_dir/$scenario.log" 2>&1
    fi && ANSIBLE_HOME="$homes/$scenario" molecule test -s "$scenario" >>"$log_dir/$scenario.log" 2>&1
  else
    what="pytest tests/$scenario"
    pytest "tests/$scenario" -v >"$log_dir/$scenario.log" 2>&1
  fi
  rc=$?
  printf '=== %s: %s in %d s\n' "$what" "$([[ $rc == 0 ]] && echo passed || echo FAILED)" \
    "$(( $(date +%s) - start ))"
  if [[ $rc != 0 ]]; then
    echo "--- log of $scenario ($log_dir/$scenario.log)"
    cat "$log_dir/$scenario.log"
    echo "--- end of the log of $scenario"
  fi
  return "$rc"
}

failed=0
declare -A running=()
for scenario in "$@"; do
  while (( ${#running[@]} >= jobs )); do
    wait -n -p done_pid
    rc=$?
    [[ $rc == 0 ]] || failed=1
    unset "running[$done_pid]"
  done
  (( failed )) && [[ "${KEEP_GOING:-0}" != 1 ]] && break
  run_one "$scenario" &
  running[$!]=$scenario
done
for pid in "${!running[@]}"; do
  wait "$pid" || failed=1
done
if (( failed )); then
  echo "molecule: at least one scenario failed"
  exit 1
fi
echo "molecule: $# scenarios passed"
