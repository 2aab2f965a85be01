#!/usr/bin/env bash
# Builds the lab's signed flat apt repository that stands in for NVIDIA's CUDA
# repository: OUTDIR/cuda/repos/debian12/x86_64/{*.deb,Packages,Packages.gz,Release,Release.gpg,InRelease}.
# A fresh signing key is generated on every build; it reaches the node only
# through the cuda-keyring package, exactly like NVIDIA's key does.
#
# usage: build-repo.sh OUTDIR
# env:   LAB_CUDA_REPO_URL  URL the keyring package points apt at
#                           (default http://127.0.0.1:8089/cuda/repos/debian12/x86_64/)
#        LAB_NVIDIA_SMI     simulated nvidia-smi to ship (default ../sim/nvidia-smi)
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUTDIR="$1"
REPO_SUBDIR="cuda/repos/debian12/x86_64"
REPO_URL="${LAB_CUDA_REPO_URL:-http://127.0.0.1:8089/${REPO_SUBDIR}/}"
NVIDIA_SMI="${LAB_NVIDIA_SMI:-${HERE}/../sim/nvidia-smi}"

for tool in dpkg-deb gpg apt-ftparchive gzip; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        hint=""
        [[ "$tool" == apt-ftparchive ]] && hint=" (apt-get install apt-utils)"
        echo "build-repo.sh: $tool is required${hint}" >&2
        exit 1
    fi
done
if [[ ! -f "$NVIDIA_SMI" ]]; then
    echo "build-repo.sh: simulated nvidia-smi not found at $NVIDIA_SMI (set LAB_NVIDIA_SMI)" >&2
    exit 1
fi

WORK="$(mktemp -d)"
trap 'gpgconf --homedir "$WORK/gnupg" --kill all >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
export GNUPGHOME="$WORK/gnupg"
mkdir -m 0700 "$GNUPGHOME"

gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
    --quick-gen-key "inferops lab CUDA repository <cuda-lab@inferops.invalid>" rsa3072 sign 1y
gpg --batch --export > "$WORK/cuda-archive-keyring.gpg"

REPO="$OUTDIR/$REPO_SUBDIR"
rm -rf "$REPO"
mkdir -p "$REPO"

stage() {
    local name="$1"
    cp -a "$HERE/packages/$name" "$WORK/stage/$name"
}
mkdir -p "$WORK/stage"
for dir in "$HERE"/packages/*/; do
    stage "$(basename "$dir")"
done

# Files produced at build time rather than kept in the package trees.
install -D -m 0644 "$WORK/cuda-archive-keyring.gpg" \
    "$WORK/stage/cuda-keyring/usr/share/keyrings/cuda-archive-keyring.gpg"
# git keeps no empty folders: create the one the source list goes into.
mkdir -p "$WORK/stage/cuda-keyring/etc/apt/sources.list.d"
printf 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] %s /\n' "$REPO_URL" \
    > "$WORK/stage/cuda-keyring/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
install -D -m 0755 "$NVIDIA_SMI" "$WORK/stage/nvidia-smi/usr/bin/nvidia-smi"
for release in 12.8 13.0; do
    mkdir -p "$WORK/stage/cuda-cudart-${release/./-}/usr/local/cuda-$release/targets/x86_64-linux/lib"
    ln -sfn targets/x86_64-linux/lib "$WORK/stage/cuda-cudart-${release/./-}/usr/local/cuda-$release/lib64"
done

for dir in "$WORK"/stage/*/; do
    name="$(basename "$dir")"
    find "$dir" -type d -exec chmod 0755 {} +
    find "$dir" -type f ! -path '*/DEBIAN/*' ! -perm -u+x -exec chmod 0644 {} +
    find "$dir" -type f -perm -u+x -exec chmod 0755 {} +
    find "$dir/DEBIAN" -type f \( -name control -o -name conffiles \) -exec chmod 0644 {} +
    find "$dir/DEBIAN" -type f \( -name 'pre*' -o -name 'post*' \) -exec chmod 0755 {} +
    version="$(sed -n 's/^Version: //p' "$dir/DEBIAN/control")"
    arch="$(sed -n 's/^Architecture: //p' "$dir/DEBIAN/control")"
    dpkg-deb --root-owner-group -Zxz --build "$dir" "$REPO/${name}_${version}_${arch}.deb" >/dev/null
done

cd "$REPO"
apt-ftparchive packages . > Packages
gzip -9nc Packages > Packages.gz
apt-ftparchive \
    -o APT::FTPArchive::Release::Origin="NVIDIA" \
    -o APT::FTPArchive::Release::Label="NVIDIA CUDA" \
    -o APT::FTPArchive::Release::Architectures="amd64 all" \
    -o APT::FTPArchive::Release::Description="Lab stand-in for NVIDIA's CUDA repository" \
    release . > Release
gpg --batch --yes --pinentry-mode loopback --passphrase '' --armor --detach-sign -o Release.gpg Release
gpg --batch --yes --pinentry-mode loopback --passphrase '' --clearsign -o InRelease Release

echo "build-repo.sh: $(find . -maxdepth 1 -name '*.deb' | wc -l) packages signed into $REPO"
