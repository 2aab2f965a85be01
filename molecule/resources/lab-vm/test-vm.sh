#!/usr/bin/env bash
# `make test-vm`: the collection on a real kernel, the way an operator meets a fresh GPU VM.
#
# A fresh lab guest (start-vm.sh) reached over SSH as the unprivileged sudoer with become, from a
# project outside the checkout whose ansible.cfg keeps Ansible's defaults (no pipelining) and whose
# collection was installed with `ansible-galaxy collection install` from the built tarball. Then:
#   1. deploy.yml from nothing to a serving node, the driver's reboot included; while that run
#      reboots the node, a second run is started and must refuse the node lock naming the first;
#   2. deploy.yml again: changed=0;
#   3. a reboot of the guest under the running server: healthy again by itself, timed from the
#      reboot command.
# Each step prints its time. The guest is stopped at the end, also when a step fails.
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
api_key=lab-api-key-not-a-secret  # the lab inventory's made-up key

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

# What stands in for the GPU boundary, taken from the lab image as the container scenarios have it:
# the simulated CUDA apt repository and its loopback server, the PCI tree, the server stand-in and
# the wheels of the pinned versions. Everything else the collection installs itself.
push_lab_layer() {
  local stage=$work/layer container path
  docker image inspect inferops-lab:bookworm >/dev/null 2>&1 || "$repo/molecule/resources/lab/build-image.sh" >/dev/null
  mkdir -p "$stage"
  container=$(docker create inferops-lab:bookworm)
  for path in /srv/inferops-lab /opt/inferops-lab /etc/systemd/system/lab-cuda-repo.service /etc/tmpfiles.d/inferops-lab.conf; do
    mkdir -p "$stage$(dirname "$path")"
    docker cp -q "$container:$path" "$stage$path"
  done
  docker rm "$container" >/dev/null
  tar -C "$stage" -cz . | guest 'sudo tar -C / -xz \
    && { grep -q find-links /etc/pip.conf || printf "find-links = /opt/inferops-lab/wheelhouse\n" | sudo tee -a /etc/pip.conf >/dev/null; } \
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
}

playbook() {
  local log=$1
  shift
  (cd "$project" && ANSIBLE_HOME=$work/ansible-home-$log "$bin/ansible-playbook" deploy.yml "$@" >"$work/$log.log" 2>&1)
}

recap() { sed -n "/^PLAY RECAP/,\$p" "$work/$1.log" | grep "^$name "; }

# A second run while the first one reboots the node: it must refuse the lock and name that run.
second_run_during_reboot() {
  local attempt=0
  until guest sudo cat /var/lib/inferops-serving/node.lock 2>/dev/null | grep -q rebooting_until; do
    [[ -f "$work/deploy.done" ]] && { echo "the first run never marked its lock as rebooting"; return 1; }
    sleep 2
  done
  while ((attempt++ < 40)); do
    if playbook second -e serving_node_lock_wait=0; then
      echo "the second run deployed while the first one held the node"
      return 1
    fi
    if grep -q 'This node is locked by another run' "$work/second.log"; then
      grep -o 'This node is locked by another run: [^.]*' "$work/second.log" | head -n 1
      return 0
    fi
    grep -q UNREACHABLE "$work/second.log" || { tail -n 20 "$work/second.log"; return 1; }
    sleep 3  # the guest is down for the reboot: try again
  done
  echo "the guest did not come back for the second run"
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
second_run_during_reboot >"$work/second.out" 2>&1 &
watcher=$!
playbook deploy || { touch "$work/deploy.done"; tail -n 40 "$work/deploy.log"; fail "deploy.yml from nothing"; }
touch "$work/deploy.done"
if ! sed -n '/gpu_vm : Reboot into the new driver\]/,/^TASK/p' "$work/deploy.log" | grep -q '^changed:'; then
  fail "deploy.yml from nothing did not reboot the node for the driver"
fi
say "deploy.yml from nothing (driver reboot included) in $((SECONDS - step)) s: $(recap deploy)"
wait "$watcher" || fail "second run during the reboot: $(cat "$work/second.out")"
say "second run during the reboot refused: $(cat "$work/second.out")"
guest test ! -e /var/lib/inferops-serving/node.lock || fail "the first run left its node lock behind"

step=$SECONDS
playbook again || { tail -n 40 "$work/again.log"; fail "deploy.yml again"; }
recap again | grep -q 'changed=0 ' || fail "deploy.yml again changed the node: $(recap again)"
say "deploy.yml again in $((SECONDS - step)) s: $(recap again)"

boot_before=$(guest cat /proc/sys/kernel/random/boot_id)
step=$SECONDS
guest sudo systemctl reboot || true
until [[ "$(guest cat /proc/sys/kernel/random/boot_id 2>/dev/null || true)" =~ ^[0-9a-f-]{36}$ ]] \
      && [[ "$(guest cat /proc/sys/kernel/random/boot_id)" != "$boot_before" ]] \
      && guest curl -fsS -m 5 -H "'Authorization: Bearer $api_key'" http://127.0.0.1:8000/v1/models >/dev/null 2>&1; do
  ((SECONDS - step < 600)) || fail "the server did not serve again within 600 s of the reboot"
  sleep 2
done
say "reboot under the running server: serving again $((SECONDS - step)) s after the reboot command"
say "passed in $((SECONDS - started)) s"
