#!/usr/bin/env bash
# Builds the lab's guest disk image: a Debian 12 VM with its own kernel, systemd, sshd, python3
# and sudo, and an unprivileged sudoer reached with a key made here, as a cloud image with
# cloud-init's default user is. Made from Debian's packages only, with debootstrap, like the
# lab container's base (../lab/build-image.sh); no loop device or partition table is needed:
# the root file system is written straight into the disk with `mke2fs -d`.
#
# The guest's /boot is not on its disk but in a folder of the host shared over 9p: QEMU boots
# the kernel and initramfs found there, so a kernel or an initramfs the guest installs is the
# one its next boot uses (start-vm.sh).
#
# The image is built once per content of this script and kept under $LAB_VM_CACHE/<digest>;
# the path of the ready image is printed on the last line.
#
# Usage: build-vm-image.sh
#   LAB_VM_CACHE   where built images are kept   (default /var/lib/inferops-lab/vm)
#   LAB_MIRROR     Debian mirror for debootstrap (default http://deb.debian.org/debian)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_VM_CACHE=${LAB_VM_CACHE:-/var/lib/inferops-lab/vm}
LAB_MIRROR=${LAB_MIRROR:-http://deb.debian.org/debian}
LAB_VM_USER=${LAB_VM_USER:-inferops}

say() { printf '[lab-vm-image] %s\n' "$*" >&2; }

digest=$( { sha256sum <"$here/build-vm-image.sh"; echo "$LAB_MIRROR $LAB_VM_USER"; } | sha256sum | cut -c1-16)
image="$LAB_VM_CACHE/$digest"
if [[ -f "$image/ready" ]]; then
  say "guest image up to date: $image"
  echo "$image"
  exit 0
fi

missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v qemu-img >/dev/null || missing+=(qemu-utils)
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 \
    "${missing[@]}" >/dev/null
fi

# One build at a time; a second caller waits and then finds the image ready.
mkdir -p "$LAB_VM_CACHE"
exec 9>"$LAB_VM_CACHE/build.lock"
flock 9
if [[ -f "$image/ready" ]]; then echo "$image"; exit 0; fi

work="$LAB_VM_CACHE/build-$digest"
rootfs="$work/rootfs"
unmount_chroot() {
  local fs
  for fs in dev/pts dev proc sys; do mountpoint -q "$rootfs/$fs" && umount -l "$rootfs/$fs"; done
  return 0
}
trap unmount_chroot EXIT
unmount_chroot
rm -rf "$work" "$image" && mkdir -p "$rootfs" "$image"
say "building the guest image with debootstrap from $LAB_MIRROR (log: $work/build.log)"
started=$SECONDS
# What a fresh Debian 12 cloud VM has: systemd, sshd, python3 for Ansible, sudo, CA certificates.
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,openssh-server,python3,python3-apt,sudo,ca-certificates,iproute2,procps,gpgv,curl,kmod,udev,initramfs-tools,locales \
  bookworm "$rootfs" "$LAB_MIRROR" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log"; exit 1; }

printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
  "$LAB_MIRROR" "$LAB_MIRROR" >"$rootfs/etc/apt/sources.list"
# The kernel's vmlinuz and initrd.img links in /boot, the folder QEMU boots from.
printf 'do_symlinks = yes\nlink_in_boot = yes\n' >"$rootfs/etc/kernel-img.conf"
mount -t proc proc "$rootfs/proc" && mount -t sysfs sys "$rootfs/sys"
mount --bind /dev "$rootfs/dev" && mount --bind /dev/pts "$rootfs/dev/pts"
# The newest kernel of bookworm and its security updates, the one whose headers the driver's DKMS
# build installs: an older one would make the first deploy install a new kernel and build its
# initramfs under emulation (over ten minutes). Baked here, natively, as a GPU cloud image carries
# them: the kernel's headers, dkms and its compiler, zstd for the initramfs. Installing them in the
# guest takes about 8 minutes under emulation and needs no kernel of its own; the deploy still
# runs its headers task (then unchanged), the DKMS build, the initramfs rebuild and the reboot.
step=$SECONDS
chroot "$rootfs" apt-get update -qq >>"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  linux-image-amd64 >>"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
kernel=$(find "$rootfs/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sort -V | tail -n 1)
kernel=${kernel#vmlinuz-}
chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "linux-headers-$kernel" linux-headers-amd64 dkms zstd >>"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
say "kernel $kernel, its headers and dkms installed in $((SECONDS - step)) s"
# The guest's own initramfs builds take only the modules its devices need (virtio, ext4, 9p), not
# every storage driver: update-initramfs under emulation then takes a fraction of its time. Set
# after the kernel's first initramfs, built here, where "dep" would look at this host's devices.
printf 'MODULES=dep\nCOMPRESS=zstd\n' >"$rootfs/etc/initramfs-tools/conf.d/lab-vm.conf"
unmount_chroot
# The lab's nvidia-smi answers only while the driver's module is loaded, as the real one does.
mkdir -p "$rootfs/etc/inferops-lab"
echo /sys/module/nvidia >"$rootfs/etc/inferops-lab/driver-module"

# TLS from inside the guest goes through a CA that only this host trusts: carry every
# certificate the host trusts, one file each, so update-ca-certificates keeps them.
cadir="$rootfs/usr/local/share/ca-certificates/inferops-lab-host"
mkdir -p "$cadir"
awk -v dir="$cadir" '/-----BEGIN CERTIFICATE-----/{n++; f=sprintf("%s/host-%03d.crt", dir, n)} f{print > f} /-----END CERTIFICATE-----/{close(f); f=""}' \
  /etc/ssl/certs/ca-certificates.crt
chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"

# Network: QEMU's user-mode network gives DHCP and a resolver at 10.0.2.3.
mkdir -p "$rootfs/etc/systemd/network"
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n' >"$rootfs/etc/systemd/network/10-lab.network"
chroot "$rootfs" systemctl enable systemd-networkd.service >/dev/null 2>&1
echo 'nameserver 10.0.2.3' >"$rootfs/etc/resolv.conf"
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\nboot /boot 9p trans=virtio,version=9p2000.L,msize=262144,nofail 0 0\n' \
  >"$rootfs/etc/fstab"
echo gpu-vm >"$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 gpu-vm\n' >"$rootfs/etc/hosts"
: >"$rootfs/etc/machine-id"
sed -i 's/^# *en_US.UTF-8/en_US.UTF-8/' "$rootfs/etc/locale.gen" && chroot "$rootfs" locale-gen >/dev/null
# The 9p modules are loaded by the time /boot is mounted, whatever the initramfs holds.
printf '9p\n9pnet_virtio\n' >"$rootfs/etc/modules-load.d/lab-boot-share.conf"

# The unprivileged sudoer, as cloud-init makes it: a key, no password, sudo without one.
ssh-keygen -q -t ed25519 -N '' -C "inferops-lab-vm" -f "$image/id_ed25519"
chroot "$rootfs" useradd -m -s /bin/bash -G sudo "$LAB_VM_USER"
install -d -m 700 "$rootfs/home/$LAB_VM_USER/.ssh"
install -m 600 "$image/id_ed25519.pub" "$rootfs/home/$LAB_VM_USER/.ssh/authorized_keys"
chroot "$rootfs" chown -R "$LAB_VM_USER:$LAB_VM_USER" "/home/$LAB_VM_USER/.ssh"
printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$LAB_VM_USER" >"$rootfs/etc/sudoers.d/90-lab-vm-user"
chmod 440 "$rootfs/etc/sudoers.d/90-lab-vm-user"
echo "$LAB_VM_USER" >"$image/user"
# A guest's boot is slow under emulation: no reverse lookups at login.
echo 'UseDNS no' >"$rootfs/etc/ssh/sshd_config.d/lab-vm.conf"

chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
cp -a "$rootfs/boot" "$image/boot"
find "$rootfs/boot" -mindepth 1 -delete
mke2fs -q -t ext4 -L root -d "$rootfs" "$work/disk.raw" 8G >/dev/null
qemu-img convert -O qcow2 "$work/disk.raw" "$image/disk.qcow2"
rm -rf "$work"
touch "$image/ready"
say "built $image in $((SECONDS - started)) s"
echo "$image"
