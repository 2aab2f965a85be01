#!/usr/bin/env bash
# Starts, stops or describes a lab guest: a fresh copy-on-write overlay on the built image
# (build-vm-image.sh), booted by QEMU with the kernel and initramfs in the guest's own /boot,
# reached over SSH on a port of 127.0.0.1 forwarded by QEMU's user-mode network.
#
# A reboot inside the guest ends QEMU (-no-reboot); the loop here starts it again on the same
# disk with the guest's current kernel and initramfs, so a kernel, a DKMS module or an initramfs
# the guest installs is what its next boot runs. A power-off inside the guest stops it.
#
# Usage: start-vm.sh start|stop|status [NAME]      (NAME default lab-vm)
#   LAB_VM_SSH_PORT      port of 127.0.0.1 forwarded to the guest's sshd (default: first free from 2222)
#   LAB_VM_ACCEL         tcg or kvm (default tcg: on this machine kind KVM opens but does not run
#                        a guest; kvm is used only when asked for, and its boot is bounded too)
#   LAB_VM_BOOT_TIMEOUT  seconds the guest has to answer SSH (default 180)
#   LAB_VM_MEMORY        guest memory in MiB (default 3072)
#   LAB_VM_CPUS          guest CPUs (default 2)
#   LAB_VM_RUN           where guests' overlays and logs live (default /var/tmp/inferops-lab-vm)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
action=${1:-start}
name=${2:-lab-vm}
LAB_VM_RUN=${LAB_VM_RUN:-/var/tmp/inferops-lab-vm}
LAB_VM_ACCEL=${LAB_VM_ACCEL:-tcg}
LAB_VM_BOOT_TIMEOUT=${LAB_VM_BOOT_TIMEOUT:-180}
LAB_VM_MEMORY=${LAB_VM_MEMORY:-3072}
LAB_VM_CPUS=${LAB_VM_CPUS:-2}
run="$LAB_VM_RUN/$name"

say() { printf '[lab-vm] %s\n' "$*" >&2; }

ssh_options() {
  printf '%s\n' -i "$run/id_ed25519" -p "$(cat "$run/port")" -o BatchMode=yes -o ConnectTimeout=5 \
    -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
}

# The guest's QEMU, started again after each reboot the guest asks for. Runs in the background.
supervise() {
  local port accel_opts=() boot="$run/boot" kernel initrd
  port=$(cat "$run/port")
  case "$LAB_VM_ACCEL" in
    kvm) accel_opts=(-accel kvm -cpu host) ;;
    tcg) accel_opts=(-accel 'tcg,thread=multi' -cpu max) ;;
    *) say "LAB_VM_ACCEL=$LAB_VM_ACCEL: expected tcg or kvm"; return 2 ;;
  esac
  while :; do
    kernel=$(readlink -f "$boot/vmlinuz")
    initrd=$(readlink -f "$boot/initrd.img")
    echo "[lab-vm] $(date -u +%FT%TZ) booting ${kernel##*/} with ${initrd##*/} ($LAB_VM_ACCEL)" >>"$run/console.log"
    qemu-system-x86_64 "${accel_opts[@]}" -machine q35 -m "$LAB_VM_MEMORY" -smp "$LAB_VM_CPUS" \
      -display none -monitor none -serial "file:$run/serial.log" -no-reboot \
      -kernel "$kernel" -initrd "$initrd" -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet" \
      -drive "file=$run/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
      -netdev "user,id=net0,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=net0 \
      -virtfs "local,path=$boot,mount_tag=boot,security_model=passthrough,id=boot" \
      >>"$run/qemu.log" 2>&1 || true
    cat "$run/serial.log" >>"$run/console.log"
    # The kernel's last words say whether the guest asked for a reboot or a power-off.
    grep -q 'reboot: Restarting system' "$run/serial.log" || break
    [[ -f "$run/stopping" ]] && break
  done
  rm -f "$run/supervisor.pid"
}

running() { [[ -f "$run/supervisor.pid" ]] && kill -0 "$(cat "$run/supervisor.pid")" 2>/dev/null; }

stop() {
  if running; then
    touch "$run/stopping"
    local pid
    pid=$(cat "$run/supervisor.pid")
    # The supervisor leads its own process group: QEMU goes with it.
    kill -- "-$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    say "stopped $name"
  fi
  rm -f "$run/supervisor.pid"
}

free_port() {
  python3 -c '
import socket, sys
for port in range(int(sys.argv[1]), 65535):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        break
' 2222
}

start() {
  local image started
  image=$("$here/build-vm-image.sh")
  stop
  rm -rf "$run" && mkdir -p "$run"
  # A fresh guest each start: its disk a copy-on-write overlay of the image, its /boot a copy.
  qemu-img create -q -f qcow2 -F qcow2 -b "$image/disk.qcow2" "$run/overlay.qcow2"
  cp -a "$image/boot" "$run/boot"
  install -m 600 "$image/id_ed25519" "$run/id_ed25519"
  cp "$image/user" "$run/user"
  echo "${LAB_VM_SSH_PORT:-$(free_port)}" >"$run/port"
  started=$SECONDS
  setsid bash "$0" __supervise "$name" </dev/null >/dev/null 2>&1 &
  echo $! >"$run/supervisor.pid"
  say "booting $name with QEMU's ${LAB_VM_ACCEL^^} accelerator${LAB_VM_ACCEL:+}" 
  [[ "$LAB_VM_ACCEL" == tcg ]] && say "(TCG emulates the CPU: KVM opens on this machine kind but does not run a guest; LAB_VM_ACCEL=kvm to try it)"
  mapfile -t opts < <(ssh_options)
  until ssh "${opts[@]}" "$(cat "$run/user")@127.0.0.1" true 2>/dev/null; do
    if ! running; then
      say "QEMU ended before the guest answered SSH; its console ($run/console.log) ends:"
      tail -n 20 "$run/console.log" "$run/qemu.log" >&2
      exit 1
    fi
    if ((SECONDS - started > LAB_VM_BOOT_TIMEOUT)); then
      say "the guest did not answer SSH on 127.0.0.1:$(cat "$run/port") within $LAB_VM_BOOT_TIMEOUT s (LAB_VM_BOOT_TIMEOUT); its console ends:"
      tail -n 20 "$run/serial.log" >&2
      stop
      exit 1
    fi
    sleep 2
  done
  say "$name answers SSH after $((SECONDS - started)) s"
  status
}

status() {
  if ! running; then say "$name is not running"; return 1; fi
  cat <<MSG
$name is running ($LAB_VM_ACCEL), an unprivileged sudoer's SSH on 127.0.0.1:$(cat "$run/port"):
  ssh -i $run/id_ed25519 -p $(cat "$run/port") -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null $(cat "$run/user")@127.0.0.1
  inventory: $name ansible_host=127.0.0.1 ansible_port=$(cat "$run/port") ansible_user=$(cat "$run/user") ansible_ssh_private_key_file=$run/id_ed25519
  console:   $run/console.log
  stop:      $0 stop $name
MSG
}

case "$action" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  __supervise) supervise ;;
  *) say "unknown action '$action': expected start, stop or status"; exit 2 ;;
esac
