#!/usr/bin/env bash
# SM-limit accuracy on a real GPU (issue: "hold each container to its SM share").
#   bench/sm_limit/run.sh [SECONDS] [OUTDIR]
# Workloads: gemm (PyTorch fp16 4096^2 matmul, compute-bound), launch (a C
# program issuing one-block kernels as fast as it can, launch-bound), launch
# built with --default-stream per-thread (the _ptsz entry points), graph (a
# PyTorch CUDA graph of 8 matmuls, replayed). Each limited run is compared with
# the same workload unlimited and without libvgpu.so, measured before and after.
# Then two gemm containers (separate state files) at 30 % and 60 % together,
# and the launch rate with libvgpu.so loaded but no SM limit (unset and 100)
# against bare, 15 rounds interleaved with an A/A control.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
out=${2:-${OUT:-/tmp/sm-limit-results}}
mkdir -p "$out"
build=build/gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHAMI_BUILD_TESTS=OFF -DHAMI_WERROR=OFF -DHAMI_LIBVGPU_ONLY=ON >/dev/null &&
  cmake --build "$build" -j "$(nproc)" --target vgpu_lib >/dev/null || exit 1
lib=$PWD/$build/src/libvgpu.so
nvcc -O2 -arch=sm_90 -o "$build/launch_bench" bench/sm_limit/launch_bench.cu || exit 1
nvcc -O2 -arch=sm_90 --default-stream per-thread -o "$build/launch_bench_ptds" \
  bench/sm_limit/launch_bench.cu || exit 1
nvcc -O2 -arch=sm_90 -o "$build/hook_bench" bench/overhead/hook_bench.cu || exit 1
work=$(mktemp -d)
raw="$out/sm-limit-raw.jsonl"
: > "$raw"
logs="$out/sm-limit-logs.txt"
: > "$logs"
# SM clock and power beside every run: a GPU with power to spare runs a lone,
# throttled tenant's kernels at higher clocks than an unlimited one's.
python3 bench/sm_limit/gpu_sampler.py "$out/sm-limit-clocks.tsv" &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT

# One core for every run, so the scheduler moving the launching thread adds
# no noise of its own.
pin=()
command -v taskset >/dev/null && pin=(taskset -c 2)

command_for() {  # workload
  case $1 in
    gemm | graph) echo "python3 bench/sm_limit/workload.py $1 $secs" ;;
    launch) echo "$build/launch_bench $secs" ;;
    launch_ptds) echo "$build/launch_bench_ptds $secs" ;;
  esac
}

run() {  # workload limit(0 = bare) tag
  local env=()
  if [ "$2" != 0 ]; then
    env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT="$2" LIBCUDA_LOG_LEVEL=3
         CUDA_DEVICE_MEMORY_SHARED_CACHE="$work/$1-$2-$3-$RANDOM.cache")
  fi
  local line t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046  # the command is words without spaces
  line=$(env "${env[@]}" "${pin[@]}" $(command_for "$1") 2>>"$logs" | tail -1)
  t1=$(date +%s.%N)
  echo "{\"workload\": \"$1\", \"limit\": $2, \"tag\": \"$3\", \"t0\": $t0, \"t1\": $t1, \"result\": $line}" >> "$raw"
}

# SM_LIMIT_PARTS picks parts of the run (all by default).
parts=" ${SM_LIMIT_PARTS:-gemm launch launch_ptds graph pair overhead} "
want() { [[ $parts == *" $1 "* ]]; }
want gemm && {
  run gemm 0 before
  for l in 10 30 50 70 90; do run gemm "$l" single; done
  run gemm 0 after
}
# The host's launch rate drifts by tens of percent within a minute on this
# machine, so each launch-bound run gets its own unlimited runs either side,
# and SM_LIMIT_LAUNCH_ROUNDS rounds of all limits give a median per limit.
want launch && for round in $(seq "${SM_LIMIT_LAUNCH_ROUNDS:-1}"); do
  for l in 10 30 50 70 90; do
    run launch 0 "before-$l-r$round"
    run launch "$l" "single-r$round"
    run launch 0 "after-$l-r$round"
  done
done
if want launch_ptds; then
  run launch_ptds 0 before
  run launch_ptds 30 single
  run launch_ptds 0 after
fi
if want graph; then
  run graph 0 before
  run graph 30 single
  run graph 0 after
fi
if want pair; then
run gemm 0 pair-before
# Two containers together: separate state files, as two pods would have.
run gemm 30 pair &
pair1=$!
run gemm 60 pair &
pair2=$!
wait $pair1 $pair2
run gemm 0 pair-after
fi

# Launch rate with the library loaded and no binding SM limit.
ab="$out/sm-limit-overhead-raw.tsv"
rounds=${SM_LIMIT_AB_ROUNDS:-15}
want overhead || rounds=0
printf 'round\tcondition\tops_per_s\n' > "$ab"
for r in $(seq "$rounds"); do
  for c in $(printf '%s\n' bare bare2 unset sm100 | shuf); do
    case $c in
      bare | bare2) env=() ;;
      unset) env=(LD_PRELOAD="$lib") ;;
      sm100) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=100
                  CUDA_DEVICE_MEMORY_SHARED_CACHE="$work/ab-$RANDOM.cache") ;;
    esac
    v=$(env "${env[@]}" "$build/hook_bench" launch | sed -n 's/.*ops_per_s=\([0-9.]*\).*/\1/p')
    printf '%s\t%s\t%s\n' "$r" "$c" "$v" >> "$ab"
  done
done
kill $sampler 2>/dev/null
python3 bench/sm_limit/summarize.py "$raw" "$ab" "$out/sm-limit-clocks.tsv" > "$out/sm-limit-summary.txt"
cat "$out/sm-limit-summary.txt"
