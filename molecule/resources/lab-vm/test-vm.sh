#!/usr/bin/env bash
# `make test-vm`: the collection on a real kernel, the way an operator meets a fresh GPU VM.
#
# A fresh lab guest (start-vm.sh) reached over SSH as the unprivileged sudoer with become, from a
# project outside the checkout whose ansible.cfg keeps Ansible's defaults (no pipelining) and whose
# collection was installed with `ansible-galaxy collection install` from the built tarball. Then:
#   1. deploy.yml from nothing to a serving node, the driver's real path included: the stand-in
#      driver package's module built by DKMS against the guest's kernel, nouveau blacklisted in a
#      rebuilt initramfs, the reboot, the module loaded in the new boot, nvidia-persistenced
#      running, nvidia-smi answering only while the module is loaded. While that run reboots the
#      node, a second run is started and must be refused the node lock by the first run's reboot
#      mark ("rebooting the node");
#   2. deploy.yml again: changed=0;
#   3. a reboot of the guest under the running server: healthy again by itself, timed from the
#      reboot command;
#   4. an experiment whose kernel answers wrong (the lab's faster-but-wrong server), rolled back
#      by the correctness lock, as the sudoer, through the files it changed: the reboot of step 3
#      makes the experiment converge every layer but does not stop the files being kept;
#   5. deploy.yml: converges once, since the record put back is still on the boot before step 3's
#      reboot (a deploy after a reboot reads the GPUs again), and changes nothing but that record;
#      then deploy.yml: changed=0.
# Each step prints its time, and each playbook its slowest tasks. The guest is stopped at the end,
# also when a step fails.
#
# Usage: test-vm.sh              LAB_VM (default test-vm) names the guest; LAB_VM_* as start-vm.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
name=${LAB_VM:-test-vm}
run=${LAB_VM_RUN:-/var/tmp/inferops-lab-vm}/$name
work=$(mktemp -d /var/tmp/inferops-test-vm.XXXXXX)
project=$work/project
bin=$repo/.venv/bin
api_key='lab-api-key-not-a-secret'  # the lab inventory's made-up key
# The one task a converge that changes nothing on the node still changes after a reboot (its record names the boot).
record_task="inferops.serving.serving : Record what the healthy converge left on the node"

say() { printf '[test-vm] %s\n' "$*"; }
fail() { say "FAILED: $*"; exit 1; }
finish() {
  "$here/start-vm.sh" stop "$name" || true
  say "logs and project kept in $work"
}
trap finish EXIT

guest() {
  ssh -i "$run/id_ed25519" -p "$(cat "$run/port")" -o BatchMode=yes -o ConnectTimeout=5 \
    -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    "$(cat "$run/user")@127.0.0.1" "$@"
}

# What stands in for the GPU boundary, built here from molecule/resources/lab as the lab image
# build makes it: the simulated CUDA apt repository (its driver package builds a real module) and
# its loopback server, the PCI tree, nvidia-smi's helpers and the server stand-in. Everything else
# the collection installs itself, pip and apt from their real indexes.
push_lab_layer() {
  local stage=$work/layer lab=$repo/molecule/resources/lab
  mkdir -p "$stage/srv/inferops-lab" "$stage/opt/inferops-lab" "$stage/etc/systemd/system" "$stage/etc/tmpfiles.d"
  "$lab/apt-repo/build-repo.sh" "$stage/srv/inferops-lab/apt" >"$work/apt-repo.log" 2>&1 \
    || { tail -n 20 "$work/apt-repo.log"; fail "building the lab's apt repository"; }
  cp -r "$lab/sim" "$lab/sglang_sim" "$stage/opt/inferops-lab/"
  find "$stage/opt/inferops-lab" -name __pycache__ -prune -exec rm -rf {} +
  python3 "$lab/sim/make-sysfs.py" "$stage/opt/inferops-lab/sys" --gpus 8
  cp "$lab/lab-cuda-repo.service" "$stage/etc/systemd/system/"
  printf 'd /run/inferops-lab 1777 root root -\nf /run/inferops-lab/kernel.log 0644 root root -\n' \
    >"$stage/etc/tmpfiles.d/inferops-lab.conf"
  tar -C "$stage" -cz . | guest 'sudo tar -C / --no-same-owner -xz \
    && sudo systemd-tmpfiles --create /etc/tmpfiles.d/inferops-lab.conf \
    && sudo systemctl enable --now --quiet lab-cuda-repo.service'
}

# The project knows nothing of the checkout: not its ansible.cfg (pipelining on), not its
# collections folder, which the Makefile exports.
unset ANSIBLE_CONFIG ANSIBLE_COLLECTIONS_PATH ANSIBLE_PIPELINING

make_project() {
  mkdir -p "$project/inventory/group_vars" "$project/collections"
  (cd "$repo" && "$bin/ansible-galaxy" collection build --force --output-path "$work" . >/dev/null)
  # Ansible's defaults but for where the inventory and the collection are: no pipelining.
  printf '[defaults]\ninventory = inventory/hosts.yml\ncollections_path = ./collections\nhost_key_checking = false\n' \
    >"$project/ansible.cfg"
  (cd "$project" && "$bin/ansible-galaxy" collection install --force -p ./collections "$work"/inferops-serving-*.tar.gz >/dev/null)
  cat >"$project/inventory/hosts.yml" <<EOF
gpu_nodes:
  hosts:
    $name:
      ansible_host: 127.0.0.1
      ansible_port: $(cat "$run/port")
      ansible_user: $(cat "$run/user")
      ansible_ssh_private_key_file: $run/id_ed25519
      ansible_become: true
      ansible_python_interpreter: /usr/bin/python3
EOF
  cp -r "$repo/inventories/lab/group_vars/gpu_nodes" "$project/inventory/group_vars/"
  printf -- '---\n- name: Deploy\n  ansible.builtin.import_playbook: inferops.serving.deploy\n' >"$project/deploy.yml"
  printf -- '---\n- name: Experiment\n  ansible.builtin.import_playbook: inferops.serving.experiment\n' >"$project/experiment.yml"
  # Given with -e @ to the experiment only: the deploys run the inventory as an operator keeps it.
  cat >"$project/lab-experiment.yml" <<'EOF'
serving_experiments:
  lab_fast_but_wrong:
    description: More requests in flight and a kernel that returns wrong sums (the lab server's answers part at token 6).
    vars:
      sglang_server_extra_args:
        max-running-requests: 2048
      sglang_server_extra_env:
        INFEROPS_LAB_SIM_DIVERGE_AT: "6"
serving_benchmark_repeats: 3
EOF
}

playbook() {
  local log=$1
  shift
  # ANSIBLE_LOG_PATH only adds a timestamped copy of the output, from which the slowest tasks come.
  (cd "$project" && ANSIBLE_HOME=$work/ansible-home-$log ANSIBLE_LOG_PATH=$work/$log.timed.log \
    exec "$bin/ansible-playbook" "${PLAYBOOK:-deploy.yml}" "$@" >"$work/$log.log" 2>&1)
}

recap() { sed -n "/^PLAY RECAP/,\$p" "$work/$1.log" | grep "^$name "; }

# The tasks of a playbook's run that took longest, from its timestamped log.
slowest_tasks() {
  python3 - "$work/$1.timed.log" <<'PY'
import datetime, re, sys
marks = []
for line in open(sys.argv[1]):
    found = re.match(r'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) .*?\| ((?:TASK|RUNNING HANDLER) \[.*?\]|PLAY RECAP)', line)
    if found:
        marks.append((datetime.datetime.strptime(found.group(1), '%Y-%m-%d %H:%M:%S,%f'), found.group(2)))
spans = sorted(((after[0] - before[0]).total_seconds(), before[1]) for before, after in zip(marks, marks[1:]))
for seconds, task in reversed(spans[-8:]):
    print('    %6.0f s  %s' % (seconds, task.replace('TASK [', '', 1).replace('RUNNING HANDLER [', 'handler ', 1)[:-1]))
PY
}

# The tasks that reported a change in a playbook's run, one per line, from its output.
changed_tasks() {
  awk '/^(TASK|RUNNING HANDLER) \[/ { task = $0; sub(/^(TASK|RUNNING HANDLER) \[/, "", task); sub(/\] \**$/, "", task) }
       /^changed: / { print task }' "$work/$1.log" | sort -u
}

# A second run while the first one reboots the node: the first run's lock must refuse it with its
# reboot mark. The first run (process group $1) is paused from the moment the guest goes down for
# that reboot until the second run has its answer: left running, it takes its lock back into the
# new boot a few seconds after the guest answers SSH, and whether the second run's lock task came
# before that would be a race of the two controllers, not a property of the lock.
second_run_during_reboot() {
  local first=$1 boot_before
  boot_before=$(guest cat /proc/sys/kernel/random/boot_id)
  until guest sudo cat /var/lib/inferops-serving/node.lock 2>/dev/null | grep -q rebooting_until; do
    [[ -f "$work/deploy.done" ]] && { echo "the first run never marked its lock as rebooting"; return 1; }
    sleep 1
  done
  until ! guest true 2>/dev/null; do sleep 0.5; done
  kill -STOP -- "-$first"
  # Whatever happens next, the first run goes on (the group's id is expanded now, on purpose).
  # shellcheck disable=SC2064
  trap "kill -CONT -- -$first 2>/dev/null" RETURN
  local waited=$SECONDS
  until [[ "$(guest cat /proc/sys/kernel/random/boot_id 2>/dev/null || true)" =~ ^[0-9a-f-]{36}$ ]] \
        && [[ "$(guest cat /proc/sys/kernel/random/boot_id)" != "$boot_before" ]]; do
    ((SECONDS - waited < 600)) || { echo "the guest did not come back from the driver's reboot within 600 s"; return 1; }
    sleep 1
  done
  if playbook second -e serving_node_lock_wait=0; then
    echo "the second run deployed while the first one was rebooting the node"
    return 1
  fi
  if grep -q 'This node is locked by another run: .*rebooting the node' "$work/second.log"; then
    grep -o 'This node is locked by another run: .*, rebooting the node (back by [^)]*)' "$work/second.log" | head -n 1
    return 0
  fi
  tail -n 20 "$work/second.log"
  return 1
}

started=$SECONDS
"$here/start-vm.sh" start "$name" >/dev/null
say "guest answers SSH after $((SECONDS - started)) s"

step=$SECONDS
push_lab_layer
make_project
say "lab layer pushed, collection built and installed outside the checkout in $((SECONDS - step)) s"

step=$SECONDS
setsid bash -c "$(declare -f playbook); $(declare -p project work bin); playbook deploy" &
first=$!
second_run_during_reboot "$first" >"$work/second.out" 2>&1 &
watcher=$!
wait "$first" || { touch "$work/deploy.done"; tail -n 40 "$work/deploy.log"; fail "deploy.yml from nothing"; }
touch "$work/deploy.done"
if ! sed -n '/gpu_vm : Reboot into the new driver\]/,/^TASK/p' "$work/deploy.log" | grep -q '^changed:'; then
  fail "deploy.yml from nothing did not reboot the node for the driver"
fi
say "deploy.yml from nothing (driver reboot included) in $((SECONDS - step)) s: $(recap deploy)"
slowest_tasks deploy
wait "$watcher" || fail "second run during the reboot: $(cat "$work/second.out")"
say "second run during the driver's reboot refused: $(cat "$work/second.out")"
guest test ! -e /var/lib/inferops-serving/node.lock || fail "the first run left its node lock behind"

# The driver's real path, as the node shows it.
guest sudo dkms status nvidia | grep -q "nvidia/580.95.05, $(guest uname -r), x86_64: installed" \
  || fail "DKMS did not build and install the nvidia module for the running kernel: $(guest sudo dkms status)"
guest test -d /sys/module/nvidia || fail "the nvidia module is not loaded after the driver's reboot"
guest "sudo lsinitramfs /boot/initrd.img-\$(uname -r)" | grep -q 'blacklist-nouveau.conf' \
  || fail "the running initramfs does not blacklist nouveau"
guest systemctl is-active --quiet nvidia-persistenced || fail "nvidia-persistenced is not running"
guest nvidia-smi --query-gpu=index --format=csv,noheader | grep -qx 7 || fail "nvidia-smi does not list 8 GPUs"
guest sudo modprobe -r nvidia
smi_rc=0
smi_out=$(guest nvidia-smi) || smi_rc=$?
guest sudo modprobe nvidia
[[ $smi_rc == 9 && "$smi_out" == "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."* ]] \
  || fail "nvidia-smi without the nvidia module: rc $smi_rc, $smi_out"
say "module nvidia built by DKMS for $(guest uname -r) and loaded, nouveau blacklisted in the initramfs, \
nvidia-persistenced running; nvidia-smi fails with rc 9 while the module is unloaded"

step=$SECONDS
playbook again || { tail -n 40 "$work/again.log"; fail "deploy.yml again"; }
recap again | grep -q 'changed=0 ' || fail "deploy.yml again changed the node: $(recap again)"
say "deploy.yml again in $((SECONDS - step)) s: $(recap again)"
slowest_tasks again

boot_before=$(guest cat /proc/sys/kernel/random/boot_id)
step=$SECONDS
# In the background: `systemctl reboot` over SSH returns only when the guest drops the connection.
guest sudo systemctl reboot >/dev/null 2>&1 &
down=
until [[ -n "$down" ]]; do
  guest test "\$(cat /proc/sys/kernel/random/boot_id)" = "$boot_before" 2>/dev/null || down=$((SECONDS - step))
  ((SECONDS - step < 600)) || fail "the guest did not go down within 600 s of the reboot command"
  sleep 0.5
done
until [[ "$(guest cat /proc/sys/kernel/random/boot_id 2>/dev/null || true)" =~ ^[0-9a-f-]{36}$ ]] \
      && [[ "$(guest cat /proc/sys/kernel/random/boot_id)" != "$boot_before" ]]; do
  ((SECONDS - step < 600)) || fail "the guest did not answer SSH within 600 s of the reboot command"
  sleep 1
done
ssh_back=$((SECONDS - step))
until guest curl -fsS -m 5 -H "'Authorization: Bearer $api_key'" http://127.0.0.1:8000/v1/models >/dev/null 2>&1; do
  ((SECONDS - step < 600)) || fail "the server did not serve again within 600 s of the reboot"
  sleep 1
done
say "reboot under the running server: SSH gone after $down s, back after $ssh_back s, serving again \
$((SECONDS - step)) s after the reboot command"

step=$SECONDS
if PLAYBOOK=experiment.yml playbook experiment -e @lab-experiment.yml -e serving_experiment=lab_fast_but_wrong; then
  fail "the experiment whose answers differ was kept: $(recap experiment)"
fi
if ! grep -q "Experiment lab_fast_but_wrong rolled back on $name: answers changed" "$work/experiment.log" \
   || ! grep -q "The baseline is running and healthy again" "$work/experiment.log"; then
  tail -n 40 "$work/experiment.log"
  fail "the experiment did not end rolled back by the correctness lock"
fi
rollback=$(guest sudo cat /var/lib/sglang/history.jsonl | python3 -c '
import json, sys
r = [record for record in map(json.loads, filter(str.strip, sys.stdin)) if record["event"] == "rollback"][-1]
print("%s, recovery %s s" % (r["how"], r["recovery_s"]))')
[[ "$rollback" == "files put back: "* ]] || fail "the experiment was not rolled back through its files: $rollback"
say "experiment rolled back by the correctness lock in $((SECONDS - step)) s ($rollback): $(recap experiment)"
slowest_tasks experiment
step=$SECONDS
playbook after-experiment || { tail -n 40 "$work/after-experiment.log"; fail "deploy.yml after the experiment"; }
grep -q "$name would change: the node restarted since the last deploy" "$work/after-experiment.log" \
  || fail "deploy.yml after the rollback did not converge for the reboot of step 3: $(recap after-experiment)"
# The rollback left the stack as the deploy had: the converge only records the new boot.
[[ "$(changed_tasks after-experiment)" == "$record_task" ]] \
  || fail "deploy.yml after the rollback changed more than its record: $(changed_tasks after-experiment | paste -sd ';')"
say "deploy.yml after the rollback, converging for the reboot of step 3, in $((SECONDS - step)) s: $(recap after-experiment)"
step=$SECONDS
playbook settled || { tail -n 40 "$work/settled.log"; fail "deploy.yml after the converge"; }
recap settled | grep -q 'changed=0 ' || fail "deploy.yml after the converge changed the node: $(recap settled)"
say "deploy.yml again in $((SECONDS - step)) s: $(recap settled)"
say "passed in $((SECONDS - started)) s"
