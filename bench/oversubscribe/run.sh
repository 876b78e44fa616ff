#!/usr/bin/env bash
# Virtual device memory (CUDA_OVERSUBSCRIBE) on a real GPU, docs/virtual-memory.md:
#   bench/oversubscribe/run.sh [STEPS] [OUTDIR]
# Needs one NVIDIA GPU with at least 12 GiB, PyTorch with CUDA and torchvision.
# A PyTorch program trains a torchvision ResNet (random weights, random data,
# SGD) under libvgpu.so with an 8 GiB limit; train.py --calibrate picks the
# batch whose peak allocation is ~6 GiB. Conditions, each a fresh process:
#   room       nothing else on the GPU; no CUDA_OVERSUBSCRIBE (the baseline)
#   room-os    nothing else on the GPU; CUDA_OVERSUBSCRIBE=true (nothing spills)
#   tight      hog.py holds all but 4 GiB of the GPU; no CUDA_OVERSUBSCRIBE:
#              must end in torch.OutOfMemoryError, caught (exit 3)
#   tight-os   the same with CUDA_OVERSUBSCRIBE=true: must complete, spilling
#   tight-os-x the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
# Each prints steps/s, peak allocated bytes and the bytes libvgpu reports
# spilled for the process (its state-file slot). Summary in OUTDIR/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
steps=${1:-30}
out=${2:-${OUT:-/tmp/bench-results}}
mkdir -p "$out"
. bench/gpu_build.sh  # sets build, lib, vgpu
work=$(mktemp -d)
here=bench/oversubscribe
hog_pid=

stop_hog() {
  if [ -n "$hog_pid" ]; then
    kill "$hog_pid" 2>/dev/null
    wait "$hog_pid" 2>/dev/null
    hog_pid=
  fi
}
trap 'stop_hog; rm -rf "$work"' EXIT

start_hog() {  # holds all but 4 GiB of GPU 0 until killed
  rm -f "$work/held"
  python3 "$here/hog.py" --leave-gib 4 --ready "$work/held" &
  hog_pid=$!
  for _ in $(seq 600); do
    [ -f "$work/held" ] && return 0
    kill -0 "$hog_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "hog.py did not get ready" >&2
  exit 1
}

# The batch: calibrated without the library, on an empty GPU.
batch=$(python3 "$here/train.py" --calibrate --target-gib 6 | sed -n 's/^batch=//p')
[ -n "$batch" ] || { echo "calibration failed" >&2; exit 1; }
{
  echo "# bench/oversubscribe/run.sh: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  echo "# torch $(python3 -c 'import torch, torchvision; print(torch.__version__, torch.version.cuda, torchvision.__version__)')"
  echo "# resnet50, batch $batch (peak ~6 GiB allocated), $steps timed steps after 3 warm-up, limit 8 GiB"
} > "$out/summary.txt"

run() {  # condition env...
  local cond=$1; shift
  local cache=$work/$cond.cache
  rm -f "$cache"
  env LD_PRELOAD="$lib" CUDA_DEVICE_MEMORY_LIMIT=8g CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
    "$@" python3 "$here/train.py" --batch "$batch" --steps "$steps" --state-file "$cache" \
    >"$out/$cond.log" 2>&1
  local rc=$?
  echo "$cond exit=$rc $(grep '^result=' "$out/$cond.log" | tail -1)" | tee -a "$out/summary.txt"
}

run room
run room-os CUDA_OVERSUBSCRIBE=true
start_hog
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader | sed 's/^/# hog holds: /' >> "$out/summary.txt"
run tight
run tight-os CUDA_OVERSUBSCRIBE=true
run tight-os-x CUDA_OVERSUBSCRIBE=true PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
stop_hog
cat "$out/summary.txt"
# Expected: room, room-os, tight-os, tight-os-x exit=0 (room-os spilled=0,
# tight-os* spilled>0); tight exit=3 result=oom.
