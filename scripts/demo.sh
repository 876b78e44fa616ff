#!/usr/bin/env bash
# The main job: GPU sharing on this machine, end to end.
#   1. builds the library, the vgpu tool and the node agent;
#   2. starts the node agent (hami-node-agent) on a state directory of its own;
#   3. runs two jobs with `vgpu run` under different limits (4 GiB + 30 % SM,
#      2 GiB + 60 % SM); the second tries to take more memory than its limit;
#   4. shows `vgpu top`, one job's state file (`vgpu inspect`) and the agent's
#      Prometheus metrics;
#   5. stops everything it started.
# On a machine without an NVIDIA GPU (or without a working driver) everything
# runs on the simulated GPU CI uses (tests/support/simgpu), and it says so.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake --preset release >/dev/null
targets=(vgpu vgpu_lib hami-node-agent simcuda simnvml cuda-client)
cmake --build --preset release -j "$(nproc)" --target "${targets[@]}" >/dev/null

bin=$PWD/build/release
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }

# A real GPU when NVML answers and a CUDA PyTorch is there to drive it;
# otherwise the simulated one, through its own libcuda/libnvidia-ml.
real=false
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 &&
  python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  real=true
fi
if $real; then
  say "NVIDIA GPU found: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  nvml=libnvidia-ml.so.1
else
  say "No NVIDIA GPU here: running on the SIMULATED GPU (two 80 GiB devices, tests/support/simgpu)"
  export LD_LIBRARY_PATH=$bin/tests/support/simgpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export SIMGPU_STATE=$work/simgpu.state SIMGPU_KERNEL_NS=2000000
  nvml=$bin/tests/support/simgpu/lib/libnvidia-ml.so.1
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
say "Starting the node agent: hami-node-agent --hook-path $work --interval 1s (metrics on 127.0.0.1:$port)"
"$bin/src/hami-node-agent" --hook-path "$work" --interval 1s --pod-names none \
  --metrics-bind-address "127.0.0.1:$port" --nvml-library "$nvml" --log-level warn &
pids+=($!)

# Each job: allocate, then keep the GPU busy until stdin closes (the fifo
# below is held open by this script and closed at the end).
mkfifo "$work/hold"
exec 3<>"$work/hold"
run_job() {  # name memory cores workload...
  local name=$1 mem=$2 cores=$3
  shift 3
  "$bin/src/vgpu" run --hook-path "$work" --nvml-library "$nvml" --library "$bin/src/libvgpu.so" \
    --memory "$mem" --cores "$cores" --name "$name" --policy binpack -- "$@" <&3 >"$work/$name.log" 2>&1 &
  pids+=($!)
}
if $real; then
  job='
import sys, time, torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
grab = int(sys.argv[1]) if len(sys.argv) > 1 else 0
held = []
try:
    for _ in range(grab): held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    print(f"allocated {grab * 256} MiB", flush=True)
except torch.cuda.OutOfMemoryError:
    print(f"OutOfMemoryError after {len(held) * 256} MiB: the limit holds", flush=True)
end = time.time() + 20
while time.time() < end:
    for _ in range(10): a @ b
    torch.cuda.synchronize()
'
  run_job train 4g 30 python3 -c "$job" 8
  run_job serve 2g 60 python3 -c "$job" 16
else
  # Batches of 100 kernels of 2 ms GPU time, each waited for: a job that keeps
  # launching, as a training loop does.
  loop=()
  for _ in $(seq 300); do loop+=(launchpath:kernel:100 sync); done
  run_job train 4g 30 "$bin/tests/vgpu/cuda-client" init ctx:0 alloc:2g "${loop[@]}" hold
  run_job serve 2g 60 "$bin/tests/vgpu/cuda-client" init ctx:0 fill:256m "${loop[@]}" hold
fi
# Both jobs active on one GPU: the agent turns their utilisation switch on and
# the SM shares start to hold; give it a few periods.
sleep 8

say "Job 'serve' asked for more than its 2 GiB:"
if $real; then
  grep -h 'OutOfMemory\|allocated' "$work/serve.log" || cat "$work/serve.log"
else
  grep -h 'op=fill' "$work/serve.log" | awk '{
    for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    printf "allocated %d MiB in 256 MiB chunks, then CUDA_ERROR_OUT_OF_MEMORY (rc=%s): the 2 GiB limit holds\n", f["allocated"] / 1048576, f["rc"]
    print "(the rest of the 2 GiB is the CUDA context, which counts against the limit)" }'
fi

say "\$ vgpu top --once --hook-path $work"
"$bin/src/vgpu" top --once --hook-path "$work" --nvml-library "$nvml"

file=$(ls "$work"/containers/*_train/vgpu.cache | head -1)
say "\$ vgpu inspect $file"
"$bin/src/vgpu" inspect "$file"

say "The node agent's metrics (curl 127.0.0.1:$port/metrics | grep ...)"
python3 - "$port" <<'EOF'
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode()
keep = ("hami_vgpu_memory_used_bytes", "hami_vgpu_memory_limit_bytes",
        "hami_container_device_utilization_ratio", "hami_container_device_sm_limit_ratio",
        "hami_host_gpu_utilization_ratio", "hami_monitor_unresolved_processes")
for line in text.splitlines():
    if line.startswith(keep):
        print(line)
EOF

say "Stopping the jobs and the agent"
exec 3>&-
