#!/usr/bin/env bash
# Spatial sharing through MPS on a real GPU (H100/H200), docs/sharing-modes.md:
#   bench/mps/run.sh [OUTDIR]
# A latency-sensitive service (bench/sm_limit/models.py gpt2_generate: GPT-2
# small `generate`, batch 4, 32 new tokens, requests back to back) beside a
# trainer (gpt2_train: GPT-2 small training steps, batch 8 x 128), random
# weights. Each alone first (no MPS), then side by side: plain time slicing,
# and as clients of one MPS server with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
# service/trainer = 30/60 (each capped at its share), 100/60, 100/70, 100/80
# (the service a high-priority pod: no cap; the trainer capped at its share)
# and 100/100. Every MPS client is started by `vgpu run --sharing mps`
# (libvgpu.so with its memory limit and no SM limit; --priority high for the
# uncapped service), which also starts the GPU's MPS control daemon. The trainer starts first; the service runs while it
# trains, and the trainer's rate is counted over the service's window.
# Then: what a 4 GiB MPS client sees and may allocate (with libvgpu.so and
# with MPS's pinned limit alone), what a fatal GPU fault in one client does to
# another, and what killing the MPS daemon does, each followed by a fresh
# client once the daemon is back. MPS_ROUNDS=N repeats the solo runs and the
# judged pairs N times in random orders (MPS_FIRST_ROUND=K numbers them from K,
# so that calls' mps-raw.jsonl can be joined); MPS_EXTRAS=0 runs only those. Writes OUTDIR/mps-raw.jsonl (one line per
# program run), mps-logs.txt (their stderr tails), memory.txt, faults.txt and
# the verdicts, mps-summary.txt (also printed).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
final=${1:-${OUT:-/tmp/mps-results}}
mkdir -p "$final"
out=$(mktemp -d)
mkdir -p "$out"/r{1..9}  # one file per run here; gathered into $final at the end
export PYTHONUNBUFFERED=1
. bench/gpu_build.sh  # sets build, lib, vgpu
models=bench/sm_limit/models.py
here=bench/mps
work=$(mktemp -d)
state=$work/state
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
pipe=$state/mps/$uuid/pipe  # where vgpu run keeps GPU 0's daemon
nvcc -o "$work/fault" "$here/fault.cu" || exit 1
svc_s=${MPS_SERVICE_SECONDS:-16}
trn_s=${MPS_TRAINER_SECONDS:-32}

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
# pair NAME "SERVICE_PREFIX" "TRAINER_PREFIX" (newline-separated words, or "")
pair() {
  local name=$1
  local se=() te=()
  [ -n "$2" ] && mapfile -t se <<<"$2"
  [ -n "$3" ] && mapfile -t te <<<"$3"
  ${te[@]+"${te[@]}"} python3 "$models" gpt2_train --warmup 3 --seconds "$trn_s" >"$out/$name.trainer.json" 2>"$out/$name.trainer.err" &
  local tp=$!
  sleep 10
  ${se[@]+"${se[@]}"} python3 "$models" gpt2_generate --warmup 3 --seconds "$svc_s" >"$out/$name.service.json" 2>"$out/$name.service.err"
  wait "$tp"
  keep "$name.trainer" "$name.service"
  echo "$name done"
}
# keep NAME...: the runs' result lines into OUTDIR at once, so a run cut short
# by a time limit still leaves what it measured.
keep() {
  local n
  for n in "$@"; do
    printf '%s %s\n' "$n" "$(tail -1 "$out/$n.json")" >>"$final/mps-raw.jsonl"
    { echo "## $n"; tail -5 "$out/$n.err"; } >>"$final/mps-logs.txt"
  done
}
solo() {  # NAME WORKLOAD SECONDS "PREFIX"
  local e=()
  [ -n "$4" ] && mapfile -t e <<<"$4"
  ${e[@]+"${e[@]}"} python3 "$models" "$2" --warmup 3 --seconds "$3" >"$out/$1.json" 2>"$out/$1.err"
  keep "$1"
  echo "$1 done"
}

{
  echo "# bench/mps/run.sh: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# torch $(python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)')"
  echo "# GPU 0: $uuid; MPS clients through: $vgpu run --sharing mps"
} >"$final/mps-machine.txt"
: >"$final/mps-raw.jsonl"
: >"$final/mps-logs.txt"

# Rounds (MPS_ROUNDS, default 1) of the solo runs and the judged pairs in a
# random order, each pair compared with its own round's solo figures: the host
# runs the service's Python, and its speed drifts between machines and minutes.
rounds=${MPS_ROUNDS:-1}
first=${MPS_FIRST_ROUND:-1}  # e.g. 3 in a second call: its rounds are r3...
for r in $(seq "$first" $((first + rounds - 1))); do
  for c in $(printf '%s\n' solo-service solo-trainer mps-solo-service-100 mps-30-60 mps-100-60 \
             mps-100-70 | shuf); do
    case $c in
      mps-solo-service-100) solo "r$r/$c" gpt2_generate "$svc_s" "$(vrun svc 8g 30 high)" ;;
      solo-service) solo "r$r/solo-service" gpt2_generate "$svc_s" "" ;;
      solo-trainer) solo "r$r/solo-trainer" gpt2_train "$svc_s" "" ;;
      mps-30-60) pair "r$r/mps-30-60" "$(vrun svc 8g 30)" "$(vrun trn 40g 60)" ;;
      mps-100-*) pair "r$r/$c" "$(vrun svc 8g 30 high)" "$(vrun trn 40g "${c##*-}")" ;;
    esac
  done
done
extras=${MPS_EXTRAS:-1}  # 0: the rounds only
if [ "$extras" = 1 ]; then
pair r1/timeslice "" ""
solo r1/mps-solo-service-30 gpt2_generate "$svc_s" "$(vrun svc 8g 30)"
pair r1/mps-100-80 "$(vrun svc 8g 30 high)" "$(vrun trn 40g 80)"
pair r1/mps-100-100 "$(vrun svc 8g 100)" "$(vrun trn 40g 100)"

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
