#!/usr/bin/env bash
# Bakes the lab's pre-installed GPU VM image, as a cloud's or a Proxmox template's "GPU image":
# a lab node that deploy.yml converged once (driver and CUDA packages, the release set's venv,
# the service user), with what makes it a serving node taken off again: the server's unit,
# environment file and launcher, the deploy record and the node's history. A node started from
# it is new to the collection (no record, no history, nothing serving); its first deploy finds
# the packages in place instead of installing them. Its pip skips byte-compiling (as the sglang
# scenario's node does): these scenarios prove which files an install leaves, not Python's
# bytecode, and compiling sglang's thousands of modules is most of a release set's install time.
#
# The scenarios whose subject is not a fresh install (default, experiment, upgrade, fleet) start
# from it; the README checks' `make demo` converges the plain lab image from nothing.
#
# Usage: bake-image.sh [--force]
#   LAB_IMAGE         the lab image it starts from      (default inferops-lab:bookworm)
#   LAB_BAKED_IMAGE   image to produce                  (default inferops-lab-baked:bookworm)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
LAB_IMAGE=${LAB_IMAGE:-inferops-lab:bookworm}
LAB_BAKED_IMAGE=${LAB_BAKED_IMAGE:-inferops-lab-baked:bookworm}
force=${1:-}
bin="$repo/.venv/bin"

say() { printf '[lab-bake] %s\n' "$*"; }

# Scenarios started side by side each ask for the image (run-scenarios.sh): one bakes, the
# others wait here and then find it up to date.
exec 9>"${TMPDIR:-/tmp}/inferops-lab-bake.lock"
flock 9

# Rebaked whenever the lab image or anything the deploy runs changes.
bake_hash=$( { docker image inspect -f '{{ .Id }}' "$LAB_IMAGE"
               cd "$repo" && git ls-files -co --exclude-standard -z -- \
                 deploy.yml playbooks roles plugins inventories/lab molecule/resources/lab \
                 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
if [[ "$force" != "--force" ]] && \
   [[ "$(docker image inspect -f '{{ index .Config.Labels "inferops.lab.baked" }}' "$LAB_BAKED_IMAGE" 2>/dev/null || true)" == "$bake_hash" ]]; then
  say "$LAB_BAKED_IMAGE is up to date (inputs $bake_hash)"
  exit 0
fi

node="inferops-lab-bake-$$"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/inferops-lab-bake.XXXXXX")
log="$scratch/deploy.log"
cleanup() { docker rm -f "$node" "$node-clean" >/dev/null 2>&1 || true; rm -rf "$scratch"; }
trap cleanup EXIT

say "baking $LAB_BAKED_IMAGE (inputs $bake_hash): deploy.yml on a lab node from $LAB_IMAGE"
cd "$repo"
# The checkout's own configuration, whatever the caller exported.
export ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$repo/.collections"
"$bin/ansible-playbook" molecule/resources/lab/lab-node.yml -e lab_node_name="$node" -e lab_image="$LAB_IMAGE" \
  >"$log" 2>&1 || { tail -n 40 "$log"; exit 1; }
# The lab inventory's node, pointed at this container; its report goes to the scratch folder.
"$bin/ansible-playbook" deploy.yml -l gpu-node -e ansible_host="$node" -e serving_reports_dir="$scratch/reports" \
  >>"$log" 2>&1 || { tail -n 60 "$log"; exit 1; }
docker stop "$node" >/dev/null

# What makes the node a serving one, where the roles put it: their defaults and vars, rendered.
serving_paths_text=$("$bin/python" -c '
import sys, jinja2, yaml
names = {}
for path in sys.argv[1:]:
    names.update(yaml.safe_load(open(path)))
def value(name):
    return jinja2.Template(str(names[name])).render(names)
unit = value("sglang_server_unit_name")
for name in ("_sglang_server_unit_path", "_sglang_server_env_file", "_sglang_server_launcher",
             "serving_deploy_record_path", "serving_history_path"):
    print(value(name))
print("/etc/systemd/system/multi-user.target.wants/%s.service" % unit)
' roles/sglang_server/defaults/main.yml roles/sglang_server/vars/main.yml roles/serving/defaults/main.yml)
mapfile -t serving_paths <<<"$serving_paths_text"

# Offline, so that nothing of the bake's boot is written after it: the serving node's own
# files go, the packages, venvs and users stay.
docker commit "$node" "$LAB_BAKED_IMAGE-stage" >/dev/null
docker run --name "$node-clean" "$LAB_BAKED_IMAGE-stage" /bin/sh -c '
  set -e
  for path in "$@"; do test -e "$path" || { echo "bake-image.sh: the deploy left no $path" >&2; exit 1; }; done
  rm -f "$@"
  rm -rf /var/log/journal/* /root/.ansible
  printf "[install]\n# pip reads its negative switches from configuration with a false value: no = --no-compile.\nno-compile = no\n" >>/etc/pip.conf
  : >/etc/machine-id' bake-clean "${serving_paths[@]}" >/dev/null
docker commit --change 'CMD ["/lib/systemd/systemd"]' \
  --change "LABEL inferops.lab.baked=$bake_hash" "$node-clean" "$LAB_BAKED_IMAGE" >/dev/null
docker rm "$node-clean" >/dev/null
docker rmi "$LAB_BAKED_IMAGE-stage" >/dev/null
say "baked $LAB_BAKED_IMAGE"
