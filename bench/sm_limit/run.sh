#!/usr/bin/env bash
# The SM share on a real GPU (H100/H200), judged by what users see: NVML's
# GPU utilisation, the union of the kernels' intervals that CUPTI timed
# (torch.profiler), and the speed and latency of real PyTorch programs.
#   bench/sm_limit/run.sh [OUTDIR]
# Parts (SM_PARTS, default all): gemm graph train under pair overhead
#   gemm      fp16 GEMM loop at 10/30/50/70/90 % under `force`: NVML
#             utilisation over 10 s and in every whole second
#   graph     a CUDA-graph replay loop at 30 %: the same
#   train     ResNet-50 and GPT-2 training steps at 30 %: CUPTI busy fraction
#   under     GPT-2 `generate` at 30 % and ResNet-50 training (batch 8) at 60 %, whose
#             own GPU time is below the share: (1) in one process, phases with
#             the share enforced and not (the control file's switch, policy
#             `default`), interleaved, with an A/A; (2) processes taking
#             turns (turns.py): SM_TURN_COPIES (2) of the limited program
#             (`force`) and of the same program without libvgpu.so, and one
#             more bare one (the A/A), SM_ROUNDS rounds of 2-s phases
#   pair      two containers of GEMM loops at 30 and 60 % at once: the GPU
#             time each got by its rate (rate / the loop's rate alone x the
#             loop's NVML utilisation alone), CUPTI busy fraction, and
#             `vgpu top --once` and the node agent's
#             hami_container_device_utilization_ratio about every second
#   overhead  launch rate with nothing configured and with a share of 100,
#             against the driver's own function in the same process; and
#             with a share of 30 charged but not paced (reported, not judged)
# Writes OUTDIR/sm-raw.jsonl (one line per run), nvml.tsv, the libraries'
# exit lines (sm-logs.txt; for the below-share runs the summary lists how long
# the limiter held each back) and the verdicts (sm-summary.txt, also printed).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-${OUT:-/tmp/sm-results}}
mkdir -p "$out"
parts=" ${SM_PARTS:-gemm graph train under pair overhead} "
rounds=${SM_ROUNDS:-10}
want() { [[ $parts == *" $1 "* ]]; }
export PYTHONUNBUFFERED=1

. bench/gpu_build.sh  # sets build, lib, vgpu
bin=$build/gpu-bin
mkdir -p "$bin"
tests/gpu/build_agent_once.sh "$bin/agent-once" || exit 1
want overhead && { nvcc -O2 -arch=sm_90 -o "$bin/hook_bench" bench/overhead/hook_bench.cu -ldl || exit 1; }

raw=$out/sm-raw.jsonl
logs=$out/sm-logs.txt
: > "$raw"
: > "$logs"
work=$(mktemp -d)
{
  echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "# commit ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "# PyTorch $(python3 -c 'import torch; print(torch.__version__)')"
} > "$out/sm-machine.txt"
python3 bench/sm_limit/nvml_util.py "$out/nvml.tsv" &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT

# control_file PATH SWITCH: a control file as libvgpu.so reads it
# (region/control_file.hpp): magic, version 1, size 64, utilization_switch
# SWITCH, blocked 0.
control_file() {
  python3 -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<8sIIiiQ32x", b"HAMICTL1", 1, 64, int(sys.argv[2]), 0, 0))' "$1" "$2"
}

# run TAG WORKLOAD LIMIT [models.py args]: LIMIT 0 = without libvgpu.so.
run() {
  local tag=$1 w=$2 limit=$3
  shift 3
  local env=()
  if [ "$limit" != 0 ]; then
    env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT="$limit" GPU_CORE_UTILIZATION_POLICY="${POLICY:-force}"
         LIBCUDA_LOG_LEVEL=3 CUDA_DEVICE_MEMORY_SHARED_CACHE="$work/$tag-$w-$limit-$RANDOM.cache")
    [ -n "${CONTROL:-}" ] && env+=(VGPU_CONTROL_FILE="$CONTROL")
  fi
  local line
  line=$(env "${env[@]}" python3 bench/sm_limit/models.py "$w" "$@" 2> "$work/err" | tail -1)
  { echo "## $tag $w $limit"; grep -E "SM share|ERROR|WARN" "$work/err"; } >> "$logs"
  if [ -z "$line" ]; then
    echo "run $tag $w $limit failed:" >&2
    tail -5 "$work/err" >&2
    return
  fi
  echo "{\"tag\": \"$tag\", \"limit\": $limit, \"result\": $line}" >> "$raw"
  echo "$tag $w $limit: $line" | cut -c1-200
}

if want gemm; then
  run ref gemm 0 --seconds 6 --warmup 2
  for l in 10 30 50 70 90; do run gemm gemm "$l" --seconds 10 --warmup 2; done
fi
want graph && run graph graph 30 --seconds 10 --warmup 2

if want train; then
  for w in resnet_train gpt2_train; do
    run ref "$w" 0 --seconds 4 --profile 4 --warmup 3
    run train "$w" 30 --seconds 6 --profile 4 --warmup 3
  done
fi

if want under; then
  # ResNet-50 at batch 8 (SM_UNDER_RESNET_BATCH): its own GPU time must be
  # below the share for this part to mean anything, by NVML as well as by
  # CUPTI, in every phase: at batch 16 NVML read 49 % on average and up to
  # 61 % over 5 s on the H200 (CUPTI 30 %), at its share of 60.
  export RESNET_BATCH=${SM_UNDER_RESNET_BATCH:-8}
  export CONTROL=$work/control
  control_file "$CONTROL" 1
  for w in gpt2_generate:30 resnet_train:60; do
    run ref-under "${w%%:*}" 0 --seconds 3 --profile 3 --warmup 3  # its own GPU time, unlimited
    POLICY=default run under-ab "${w%%:*}" "${w##*:}" --warmup 4 --switch-ab "$CONTROL" \
      --rounds "${SM_AB_ROUNDS:-10}" --phase 2
  done
  unset CONTROL
  for w in gpt2_generate:30 resnet_train:60; do
    line=$(python3 bench/sm_limit/turns.py "${w%%:*}" --lib "$lib" --share "${w##*:}" \
      --rounds "$rounds" --phase 2 --copies "${SM_TURN_COPIES:-2}" --logs "$logs" --work "$work" \
      2> "$work/err" | tail -1)
    if [ -n "$line" ]; then
      echo "{\"tag\": \"under-turns\", \"limit\": ${w##*:}, \"result\": $line}" >> "$raw"
      echo "under-turns $w: $line" | cut -c1-200
    else
      echo "turns $w failed:" >&2
      tail -5 "$work/err" >&2
    fi
  done
  unset RESNET_BATCH
fi

if want pair; then
  # The GEMM loop alone first: its rate and NVML utilisation turn each
  # container's rate in the pair into the GPU time its kernels took.
  run ref-pair gemm 0 --seconds 6 --warmup 2
  hook=$work/hook
  pids=()
  for l in 30 60; do
    dir=$hook/containers/pod-gemm$l-uid_main
    mkdir -p "$dir"
    LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=$l GPU_CORE_UTILIZATION_POLICY=force LIBCUDA_LOG_LEVEL=3 \
      CUDA_DEVICE_MEMORY_SHARED_CACHE="$dir/vgpu.cache" \
      python3 bench/sm_limit/models.py gemm --seconds 30 --profile 4 --warmup 3 \
      > "$work/pair$l.out" 2> "$work/pair$l.err" &
    pids+=($!)
  done
  sleep 8  # both started, warmed up and measuring
  # A frame of each about every second for 10 s or more, inside the measured 30 s.
  : > "$out/pair-frames.txt"
  for i in $(seq "${SM_PAIR_FRAMES:-10}"); do
    { echo "### vgpu top --once, frame $i, $(date +%s.%N)"; "$vgpu" top --once --hook-path "$hook"; } \
      >> "$out/pair-frames.txt" 2>&1
    { echo "### agent, frame $i, $(date +%s.%N)"
      "$bin/agent-once" "$hook" 2 1000 | grep -E "^hami_container_device_utilization_ratio"; } \
      >> "$out/pair-frames.txt" 2>&1
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for l in 30 60; do
    { echo "## pair gemm $l"; grep -E "SM share|ERROR|WARN" "$work/pair$l.err"; } >> "$logs"
    line=$(tail -1 "$work/pair$l.out")
    [ -n "$line" ] && echo "{\"tag\": \"pair\", \"limit\": $l, \"result\": $line}" >> "$raw"
    echo "pair gemm $l: $line" | cut -c1-200
  done
fi

if want overhead; then
  ab=$out/overhead-raw.tsv
  printf 'round\tcondition\thooked\tdriver\tdriver2\thooked_is_driver\n' > "$ab"
  field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<< "$line"; }
  # sm30: a share of 30 that is charged but not paced (policy default, the
  # control file's switch 0): what charging alone costs a launch.
  control_file "$work/control-off" 0
  for r in $(seq 10); do
    for c in $(printf '%s\n' unset sm100 sm30 | shuf); do
      case $c in
        unset) env=(LD_PRELOAD="$lib") ;;
        sm100) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=100
                    CUDA_DEVICE_MEMORY_SHARED_CACHE="$work/ab-$RANDOM.cache") ;;
        sm30) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=default
                   VGPU_CONTROL_FILE="$work/control-off"
                   CUDA_DEVICE_MEMORY_SHARED_CACHE="$work/ab-$RANDOM.cache") ;;
      esac
      line=$(env "${env[@]}" "$bin/hook_bench" launch_ab)
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$(field hooked)" "$(field driver)" \
        "$(field driver2)" "$(field hooked_is_driver)" >> "$ab"
    done
  done
fi

kill $sampler 2>/dev/null
python3 bench/sm_limit/summarize.py "$raw" "$out/nvml.tsv" "$out/pair-frames.txt" \
  "$out/overhead-raw.tsv" "$logs" > "$out/sm-summary.txt"
cat "$out/sm-machine.txt" "$out/sm-summary.txt"
