#!/usr/bin/env bash
# Builds the lab node image: a Debian 12 "GPU VM" with systemd as PID 1.
#
# Docker Hub is out of reach, so the base is made with debootstrap from Debian's mirror
# and brought in with `docker import`. The lab layer on top adds only what stands in for
# the GPU boundary (simulated NVIDIA apt repository, PCI tree, nvidia-smi, SGLang server
# stand-in); everything else on the node is installed by the collection's own roles.
#
# Usage: build-image.sh [--force | --base]
#   --force          rebuild the lab layer even when it is up to date
#   --base           only the debootstrap base, when neither it nor the lab image exists (no Python
#                    packages needed: make test runs it while the controller's venv installs)
#   LAB_IMAGE        image to produce            (default inferops-lab:bookworm)
#   LAB_BASE_IMAGE   base to build on; built here from debootstrap when it does not exist
#                    (default inferops-lab-base:bookworm). Point it at another
#                    Debian-family systemd image to try the lab on another base.
#   LAB_MIRROR       Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   LAB_BUILD_DIR    scratch folder                (default /var/tmp/inferops-lab-build)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_IMAGE=${LAB_IMAGE:-inferops-lab:bookworm}
LAB_BASE_IMAGE=${LAB_BASE_IMAGE:-inferops-lab-base:bookworm}
LAB_MIRROR=${LAB_MIRROR:-http://deb.debian.org/debian}
LAB_BUILD_DIR=${LAB_BUILD_DIR:-/var/tmp/inferops-lab-build}
force=${1:-}

say() { printf '[lab-image] %s\n' "$*"; }

build_base() {
  local rootfs="$LAB_BUILD_DIR/rootfs"
  say "building base image $LAB_BASE_IMAGE with debootstrap from $LAB_MIRROR"
  rm -rf "$rootfs" && mkdir -p "$rootfs"
  # What a fresh Debian 12 cloud VM has: systemd, python3 for Ansible, sudo, CA certificates.
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,ca-certificates,iproute2,procps,gpgv,curl,kmod,udev,locales \
    bookworm "$rootfs" "$LAB_MIRROR" >"$LAB_BUILD_DIR/debootstrap.log" 2>&1 \
    || { tail -n 30 "$LAB_BUILD_DIR/debootstrap.log"; exit 1; }

  # TLS from inside the node goes through a CA that only this host trusts: carry every
  # certificate the host trusts, one file each, so update-ca-certificates keeps them.
  local cadir="$rootfs/usr/local/share/ca-certificates/inferops-lab-host"
  mkdir -p "$cadir"
  awk -v dir="$cadir" '/-----BEGIN CERTIFICATE-----/{n++; f=sprintf("%s/host-%03d.crt", dir, n)} f{print > f} /-----END CERTIFICATE-----/{close(f); f=""}' \
    /etc/ssl/certs/ca-certificates.crt
  chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
  # pip before 24.2 ignores the system store; point it there as this host does.
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"

  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
    "$LAB_MIRROR" "$LAB_MIRROR" >"$rootfs/etc/apt/sources.list"
  # Units that make no sense in a container and slow its boot.
  for unit in getty.target console-getty.service systemd-firstboot.service systemd-udevd.service \
              systemd-udev-trigger.service systemd-modules-load.service sys-kernel-debug.mount \
              sys-kernel-tracing.mount systemd-remount-fs.service; do
    ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
  done
  : >"$rootfs/etc/machine-id"
  echo gpu-node >"$rootfs/etc/hostname"
  sed -i 's/^# *en_US.UTF-8/en_US.UTF-8/' "$rootfs/etc/locale.gen" && chroot "$rootfs" locale-gen >/dev/null
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin

  tar -C "$rootfs" -c . | docker import \
    --change 'ENV container=docker' \
    --change 'CMD ["/lib/systemd/systemd"]' \
    - "$LAB_BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
}

# Host tools the build needs; a fresh Debian machine has none of them. Another apt run beside
# this one (the controller's venv support) is waited for, not collided with.
install_build_tools() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v apt-ftparchive >/dev/null || missing+=(apt-utils)
  command -v gpg >/dev/null || missing+=(gnupg)
  command -v dpkg-deb >/dev/null || missing+=(dpkg)
  ((${#missing[@]})) || return 0
  say "installing build tools: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null \
    || { apt-get update -qq -o DPkg::Lock::Timeout=300 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null; }
}

if [[ "$force" == "--base" ]]; then
  if ! docker image inspect "$LAB_BASE_IMAGE" >/dev/null 2>&1 && ! docker image inspect "$LAB_IMAGE" >/dev/null 2>&1; then
    install_build_tools
    mkdir -p "$LAB_BUILD_DIR"
    build_base
  fi
  exit 0
fi

# What every fresh lab node would otherwise download again, fetched once into the image: the
# wheels of the roles' pinned versions (pip still asks the index which versions exist, then takes
# the local file) and the Debian packages the roles install (left in apt's cache, not installed:
# the roles' real apt and pip tasks install them). Nothing else on the node changes.
repo=$(cd "$here/../../.." && pwd)
pin() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\} *\$/\1/p" "$repo/roles/$2/defaults/main.yml"; }
# The lab installs sglang and flashinfer-python of every release set (roles/sglang/vars/release_sets.yml).
lab_python="$repo/.venv/bin/python"
[[ -x "$lab_python" ]] || lab_python=python3
mapfile -t release_wheels < <("$lab_python" -c '
import sys, yaml
for release in yaml.safe_load(open(sys.argv[1]))["_sglang_release_sets"].values():
    for name in ("sglang", "flashinfer-python"):
        print("%s==%s" % (name, release["packages"][name]))
' "$repo/roles/sglang/vars/release_sets.yml")
cached_wheels=(
  "${release_wheels[@]}"
  "pip==$(pin sglang_venv_pip_version sglang)" "wheel==$(pin sglang_venv_wheel_version sglang)"
)
# The router role installs either router package; each at the release the collection is verified with.
mapfile -t router_wheels < <("$lab_python" -c '
import runpy, sys
for name, facts in sorted(runpy.run_path(sys.argv[1])["ROUTER_PACKAGES"].items()):
    print("%s==%s" % (name, facts["verified_version"]))
' "$repo/plugins/module_utils/_sglang_router_packages.py")
cached_wheels_with_deps=("${router_wheels[@]}")
cached_debs=(python3-venv python3-packaging prometheus prometheus-alertmanager prometheus-node-exporter)

# The lab layer is rebuilt whenever any file under molecule/resources/lab or a cached pin changes.
lab_hash=$( { cd "$here" && find . -type f -not -name '*.pyc' -not -name bake-image.sh -not -path '*/__pycache__/*' -print0 \
  | sort -z | xargs -0 sha256sum; echo "${cached_wheels[*]} ${cached_wheels_with_deps[*]} ${cached_debs[*]}"; } \
  | sha256sum | cut -c1-16)

if [[ "$force" != "--force" ]] && \
   [[ "$(docker image inspect -f '{{ index .Config.Labels "inferops.lab.hash" }}' "$LAB_IMAGE" 2>/dev/null || true)" == "$lab_hash" ]]; then
  say "$LAB_IMAGE is up to date (lab files $lab_hash)"
  exit 0
fi

install_build_tools
mkdir -p "$LAB_BUILD_DIR"
if ! docker image inspect "$LAB_BASE_IMAGE" >/dev/null 2>&1; then
  build_base
fi

ctx="$LAB_BUILD_DIR/context"
rm -rf "$ctx" && mkdir -p "$ctx"
say "building lab layer $LAB_IMAGE (lab files $lab_hash) on $LAB_BASE_IMAGE"
"$here/apt-repo/build-repo.sh" "$ctx/apt" >"$LAB_BUILD_DIR/apt-repo.log" 2>&1 \
  || { tail -n 30 "$LAB_BUILD_DIR/apt-repo.log"; exit 1; }
cp -r "$here/sim" "$ctx/sim"
if [[ -d "$here/sglang_sim" ]]; then cp -r "$here/sglang_sim" "$ctx/sglang_sim"; else mkdir "$ctx/sglang_sim"; fi
cp "$here/lab-cuda-repo.service" "$ctx/"
mkdir "$ctx/wheelhouse"
lab_pip=("$repo/.venv/bin/python" -m pip)
[[ -x "$repo/.venv/bin/python" ]] || lab_pip=(python3 -m pip)
# One download per wheel: pip resolves the names of one call together, and two release sets
# name sglang twice.
download_wheels() {
  local wheel
  for wheel in "${cached_wheels[@]}"; do
    "${lab_pip[@]}" download -q --no-deps -d "$ctx/wheelhouse" "$wheel" || return 1
  done
  # The router packages are never installed together: their dependencies are resolved apart too.
  for wheel in "${cached_wheels_with_deps[@]}"; do
    "${lab_pip[@]}" download -q -d "$ctx/wheelhouse" "$wheel" || return 1
  done
}
if ! download_wheels \
     >"$LAB_BUILD_DIR/wheelhouse.log" 2>&1; then
  # Only slower: each node then downloads the wheels as a real one would.
  say "could not fetch the pinned wheels (see $LAB_BUILD_DIR/wheelhouse.log); building without them"
fi
cat >"$ctx/Dockerfile" <<EOF
FROM $LAB_BASE_IMAGE
LABEL inferops.lab.hash="$lab_hash"
# systemd halts cleanly on this signal; docker import cannot set it, a build can.
STOPSIGNAL SIGRTMIN+3
# The simulated NVIDIA CUDA apt repository, served on the node's loopback like a mirror.
COPY apt /srv/inferops-lab/apt
COPY lab-cuda-repo.service /etc/systemd/system/lab-cuda-repo.service
# The simulated GPUs: PCI tree, the nvidia-smi stand-in is shipped by the driver package.
# /run/inferops-lab carries the simulated GPU load from the server stand-in to nvidia-smi, the
# GPU faults a test plants and the lab's kernel log (empty at boot).
COPY sim /opt/inferops-lab/sim
COPY sglang_sim /opt/inferops-lab/sglang_sim
COPY wheelhouse /opt/inferops-lab/wheelhouse
RUN printf 'find-links = /opt/inferops-lab/wheelhouse\\n' >>/etc/pip.conf \\
 && apt-get update -qq && apt-get install -y -qq --download-only ${cached_debs[*]} >/dev/null
RUN ln -s /etc/systemd/system/lab-cuda-repo.service /etc/systemd/system/multi-user.target.wants/lab-cuda-repo.service \\
 && python3 /opt/inferops-lab/sim/make-sysfs.py /opt/inferops-lab/sys --gpus 8 \\
 && printf 'd /run/inferops-lab 1777 root root -\\nf /run/inferops-lab/kernel.log 0644 root root -\\n' >/etc/tmpfiles.d/inferops-lab.conf \\
 && find /opt/inferops-lab -name __pycache__ -prune -exec rm -rf {} +
EOF
docker build -q -t "$LAB_IMAGE" "$ctx" >/dev/null
say "built $LAB_IMAGE"
