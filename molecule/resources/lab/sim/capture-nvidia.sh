#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Capture what a real GPU host prints, so that the simulated nvidia-smi beside this
# script and the nccl_topology parsers can be checked against it.
#
# Usage: capture-nvidia.sh OUTDIR
#
# Writes <name>.txt (stdout), <name>.stderr and <name>.rc for every nvidia-smi call
# the collection makes or imitates, including the bad-argument answers; the PCI
# tree of each GPU; and, when python3 has torch with CUDA, the NCCL topology dump
# of a one-rank NCCL job. GPU UUIDs, serial numbers and PDIs are replaced by zeros.
set -u
out=${1:?usage: capture-nvidia.sh OUTDIR}
mkdir -p "$out"
smi=${NVIDIA_SMI:-nvidia-smi}
fields=index,name,pci.bus_id,compute_cap,memory.total,memory.used,power.limit,power.draw,utilization.gpu,driver_version,uuid,serial,temperature.gpu,persistence_mode

cap() {
  local name=$1; shift
  LANG=C LC_ALL=C timeout 60 "$@" >"$out/$name.txt" 2>"$out/$name.stderr"
  echo $? >"$out/$name.rc"
}

cap smi_summary "$smi"
cap smi_list "$smi" -L
cap smi_version "$smi" --version
cap topo_m "$smi" topo -m
cap topo_mp "$smi" topo -mp
for kind in r w n a p; do cap "topo_p2p_$kind" "$smi" topo -p2p "$kind"; done
cap query_module "$smi" --query-gpu=index,name,pci.bus_id,compute_cap,memory.total,power.limit --format=csv
cap query_all "$smi" --query-gpu=$fields --format=csv
cap query_all_noheader "$smi" --query-gpu=$fields --format=csv,noheader
cap query_all_nounits "$smi" --query-gpu=$fields --format=csv,nounits
cap query_all_noheader_nounits "$smi" --query-gpu=$fields --format=csv,noheader,nounits
cap query_reordered "$smi" --query-gpu=power.limit,compute_cap,pci.bus_id,index --format=csv
cap query_id0 "$smi" -i 0 --query-gpu=index,pci.bus_id --format=csv,noheader
# The node metrics collector's query and the benchmark's power sampler, as they give them.
cap query_collector "$smi" --query-gpu=index,pci.bus_id,name,power.draw,power.limit,utilization.gpu,memory.used,memory.total,temperature.gpu --format=csv,nounits
cap query_power_sampler "$smi" --query-gpu=power.draw,utilization.gpu,power.limit --format=csv,noheader,nounits
cap smi_q_xml "$smi" -q -x
cap err_unknown_option "$smi" --bogus
cap err_topo_no_option "$smi" topo
cap err_p2p_no_value "$smi" topo -p2p
cap err_p2p_bad_value "$smi" topo -p2p x
cap err_query_bad_field "$smi" --query-gpu=bogus --format=csv
cap err_query_no_format "$smi" --query-gpu=index
cap err_query_bad_format "$smi" --query-gpu=index --format=json
cap err_bad_id "$smi" -i 99 --query-gpu=index --format=csv

# The PCI ancestry of every NVIDIA display/3D controller, as sysfs shows it.
{
  for dev in /sys/bus/pci/devices/*; do
    [[ "$(cat "$dev/vendor" 2>/dev/null)" == 0x10de ]] || continue
    echo "== $(basename "$dev") -> $(readlink -f "$dev")"
    for f in vendor device class subsystem_vendor subsystem_device numa_node local_cpulist \
             current_link_speed current_link_width max_link_speed max_link_width; do
      printf '%s: %s\n' "$f" "$(cat "$dev/$f" 2>/dev/null)"
    done
    printf 'driver: %s\n' "$(basename "$(readlink -f "$dev/driver" 2>/dev/null)" 2>/dev/null)"
    path=$(readlink -f "$dev")
    while [[ "$path" == /sys/devices/pci* ]]; do
      path=$(dirname "$path")
      [[ -f "$path/class" ]] && printf 'upstream %s: vendor %s device %s class %s\n' "$(basename "$path")" \
        "$(cat "$path/vendor")" "$(cat "$path/device")" "$(cat "$path/class")"
    done
  done
  echo "== infiniband: $(find /sys/class/infiniband -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)"
  echo "== pci devices: $(find /sys/bus/pci/devices -mindepth 1 -maxdepth 1 | wc -l)"
} >"$out/sysfs_gpus.txt" 2>&1

{ uname -r; nproc; grep -m1 'model name' /proc/cpuinfo; } >"$out/host.txt" 2>&1

# NCCL writes its topology XML during communicator init, also for one rank.
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  NCCL_TOPO_DUMP_FILE="$out/nccl_topo.xml" NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
  timeout 240 python3 - >"$out/nccl_job.txt" 2>&1 <<'EOF'
import torch
import torch.distributed as dist
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
value = torch.ones(4, device="cuda")
dist.all_reduce(value)
torch.cuda.synchronize()
print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "allreduce", value.tolist())
dist.destroy_process_group()
EOF
  echo $? >"$out/nccl_job.rc"
fi

sed -i -E -e 's/GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/GPU-00000000-0000-0000-0000-000000000000/g' \
  -e 's/(, |^)[0-9]{13}(, |$)/\10000000000000\2/g' -e 's#<serial>[0-9]+</serial>#<serial>0000000000000</serial>#' \
  -e 's#<pdi>0x[0-9a-f]+</pdi>#<pdi>0x0000000000000000</pdi>#' "$out"/*.txt
exit 0
