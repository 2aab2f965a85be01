#!/usr/bin/env bash
# Makes sure a Docker engine answers on this machine, installing and starting Debian's
# docker.io when none does. The lab node and the molecule scenarios run in containers.
set -euo pipefail

say() { printf '[docker] %s\n' "$*"; }

if docker info >/dev/null 2>&1; then
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  say "no Docker engine found: installing Debian's docker.io"
  export DEBIAN_FRONTEND=noninteractive
  # Another apt run beside this one (make test builds the lab base meanwhile) is waited for.
  apt-get update -qq -o DPkg::Lock::Timeout=300
  apt-get install -y -qq -o DPkg::Lock::Timeout=300 docker.io >/dev/null
fi

say "no Docker engine answers: starting dockerd"
if [[ "$(ps -p 1 -o comm= 2>/dev/null)" == systemd ]]; then
  systemctl start docker
else
  # No systemd on this machine (a CI runner, a container): run the daemon in the background.
  nohup dockerd >/var/log/inferops-dockerd.log 2>&1 &
fi

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    say "Docker engine is up"
    exit 0
  fi
  sleep 1
done
say "dockerd did not answer within 60 s; its log:"
tail -n 40 /var/log/inferops-dockerd.log 2>/dev/null || true
exit 1
