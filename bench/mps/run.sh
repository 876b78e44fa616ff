#!/usr/bin/env bash
# Spatial sharing through MPS on a real GPU (H100/H200), docs/sharing-modes.md:
#   bench/mps/run.sh [OUTDIR]
# A latency-sensitive service (bench/sm_limit/models.py gpt2_generate: GPT-2
# small `generate`, batch 4, 32 new tokens, requests back to back) beside a
# trainer (gpt2_train: GPT-2 small training steps, batch 8 x 128), random
# weights, in MPS_ROUNDS (default 5) interleaved rounds (bench/mps/rounds.py):
# every configuration once per round, in a random order, each pair judged
# against its own round's solo runs; medians and spreads over the rounds
# (summarize.py). The configurations (MPS_CONDITIONS, default the first five):
#   solo-service, solo-trainer   each alone, bare (no library, no MPS)
#   timeslice-30-60    time slicing: `vgpu run --cores 30` / `--cores 60`
#                      (libvgpu.so paces each to its share, no MPS)
#   mps-30-60          MPS: `vgpu run --sharing mps`, both capped at their
#                      shares (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), as default pods
#   mps-100-70         the frontier setting: the service a high-priority pod
#                      (no cap), the trainer capped at 70
#   also known: timeslice (plain time slicing, bare), mps-100-60, mps-100-80,
#   mps-100-100, mps-solo-service-100 / -30 (the service alone as an MPS client)
# Each process the configurations need is started once and kept warm between
# its phases (models.py --serve); a pair's trainer trains through the
# service's whole phase of MPS_SERVICE_SECONDS (default 7) and its rate is
# counted over that window. Then, unless MPS_EXTRAS=0: what a 4 GiB MPS client
# sees and may allocate (with libvgpu.so and with MPS's pinned limit alone),
# what a fatal GPU fault in one client does to another, and what killing the
# MPS daemon does, each followed by a fresh client once the daemon is back.
# MPS_FIRST_ROUND=K numbers the rounds from K, so that calls' mps-raw.jsonl
# can be joined. Writes OUTDIR/mps-raw.jsonl (one line per measured phase),
# mps-logs.txt (the processes' stderr), memory.txt, faults.txt and the
# verdicts, mps-summary.txt (also printed).
# Cost on one H200 (estimated from earlier runs' start-up and phase times, not
# yet measured whole): build ~1 min, start-up ~1 min, ~42 s a round of the five
# default configurations, extras ~2.5 min: ~8 min with the defaults; each
# further pair configuration adds ~9 s a round, a solo one ~7 s.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
final=${1:-${OUT:-/tmp/mps-results}}
mkdir -p "$final"
out=$(mktemp -d)  # the extras' files; gathered into $final at the end
export PYTHONUNBUFFERED=1
. bench/gpu_build.sh  # sets build, lib, vgpu
models=bench/sm_limit/models.py
here=bench/mps
work=$(mktemp -d)
state=$work/state
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
pipe=$state/mps/$uuid/pipe  # where vgpu run keeps GPU 0's daemon
nvcc -o "$work/fault" "$here/fault.cu" || exit 1
svc_s=${MPS_SERVICE_SECONDS:-7}
rounds=${MPS_ROUNDS:-5}
first=${MPS_FIRST_ROUND:-1}  # e.g. 6 in a second call: its rounds are r6...
conditions=${MPS_CONDITIONS:-solo-service solo-trainer timeslice-30-60 mps-30-60 mps-100-70}

stop_mps() { "$vgpu" mps stop --hook-path "$state" >/dev/null 2>&1; pkill -9 -f nvidia-cuda-mps 2>/dev/null; true; }
trap 'stop_mps; rm -rf "$work" "$out"' EXIT

# vrun NAME MEM CORES [PRIORITY]: the start of an MPS client's command line.
# CORES 100: no cap. --overcommit: some cases hand out more than the GPU.
vrun() {
  local a=("$vgpu" run --sharing mps --gpu 0 --hook-path "$state" --library "$lib" --name "$1"
    --memory "$2" --overcommit)
  [ "$3" -lt 100 ] && a+=(--cores "$3")
  [ -n "${4:-}" ] && a+=(--priority "$4")
  printf '%s\n' "${a[@]}" --
}
# keep NAME...: an extra's result line into OUTDIR.
keep() {
  local n
  for n in "$@"; do
    printf '%s %s\n' "$n" "$(tail -1 "$out/$n.json")" >>"$final/mps-raw.jsonl"
    { echo "## $n"; tail -5 "$out/$n.err"; } >>"$final/mps-logs.txt"
  done
}
{
  echo "# bench/mps/run.sh: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "# commit ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "# torch $(python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)')"
  echo "# GPU 0: $uuid; MPS clients through: $vgpu run --sharing mps"
  echo "# rounds r$first-r$((first + rounds - 1)), phases of $svc_s s: $conditions"
} >"$final/mps-machine.txt"
: >"$final/mps-raw.jsonl"
: >"$final/mps-logs.txt"

# The host runs the service's Python, and its speed drifts between machines
# and minutes (solo p50 180-287 ms from one round to the next on one H200):
# hence rounds, each pair against its own round's solo runs.
python3 "$here/rounds.py" --vgpu "$vgpu" --lib "$lib" --state "$state" --out "$final/mps-raw.jsonl" \
  --logs "$final/mps-logs.txt" --rounds "$rounds" --first "$first" --seconds "$svc_s" \
  --conditions "$conditions"
extras=${MPS_EXTRAS:-1}  # 0: the rounds only
if [ "$extras" = 1 ]; then
# Memory: a 4 GiB MPS pod (libvgpu.so + MPS's pinned limit), and MPS alone.
{
  echo "## 4 GiB client, vgpu run --sharing mps --memory 4g (libvgpu.so and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT):"
  mapfile -t v <<<"$(vrun mem 4g 100)"
  "${v[@]}" python3 "$here/memcheck.py" 2>&1 | tail -1
  echo "## the same without libvgpu.so (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M alone):"
  env CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M python3 "$here/memcheck.py" 2>&1 | tail -1
} >"$out/memory.txt"

fresh() {  # a new client once the trouble is over: seconds until it computes
  local t0=$SECONDS v
  mapfile -t v <<<"$(vrun fresh 1g 100)"
  for _ in 1 2 3; do
    if timeout 60 "${v[@]}" python3 -c "import torch; print((torch.ones(4, device='cuda') * 2).sum().item())" >/dev/null 2>&1; then
      echo "fresh client ok after $((SECONDS - t0)) s"; return
    fi
    sleep 2
  done
  echo "fresh client failed 3 times"
}
# A fatal fault in one client while the service serves; then the daemon killed.
{
  mapfile -t sv <<<"$(vrun svc 8g 30 high)"
  mapfile -t fv <<<"$(vrun fault 1g 100)"
  echo "## fault: an illegal-address kernel in another client while the service runs"
  "${sv[@]}" python3 "$models" gpt2_generate --warmup 3 --seconds 20 >"$out/fault.service.json" 2>"$out/fault.service.err" &
  sp=$!
  sleep 12
  timeout 60 "${fv[@]}" "$work/fault"; echo "fault client exit=$?"
  wait "$sp"; echo "service exit=$? $(tail -c 300 "$out/fault.service.err" | tr '\n' ' ')"
  echo "vgpu mps status after: $("$vgpu" mps status --hook-path "$state" 2>&1 | tr '\n' ' ')"
  fresh
  echo "## daemon killed (SIGKILL to the control daemon and server) while the service runs"
  "${sv[@]}" python3 "$models" gpt2_generate --warmup 3 --seconds 20 >"$out/kill.service.json" 2>"$out/kill.service.err" &
  sp=$!
  sleep 12
  pkill -9 -f nvidia-cuda-mps; echo "killed"
  wait "$sp"; echo "service exit=$? $(tail -c 300 "$out/kill.service.err" | tr '\n' ' ')"
  echo "vgpu mps status after: $("$vgpu" mps status --hook-path "$state" 2>&1 | tr '\n' ' ')"
  fresh  # vgpu run starts the daemon again
} >"$out/faults.txt" 2>&1
fi
stop_mps
for f in fault kill; do [ -f "$out/$f.service.err" ] && keep "$f.service"; done
[ "$extras" = 1 ] && cp "$out/memory.txt" "$out/faults.txt" "$final/"
python3 "$here/summarize.py" "$final" | tee "$final/mps-summary.txt"
