#!/usr/bin/env bash
# SM-limit accuracy on a real GPU (issue: "hold each container to its SM share").
#   bench/sm_limit/run.sh [SECONDS] [OUTDIR]
# Workloads: gemm (PyTorch fp16 4096^2 matmul, compute-bound), launch (a C
# program issuing one-block kernels as fast as it can, launch-bound), launch
# built with --default-stream per-thread (the _ptsz entry points), graph (a
# PyTorch CUDA graph of 8 matmuls, replayed). Each limited run is compared with
# the same workload unlimited and without libvgpu.so, measured before and after.
# Then two gemm containers (separate state files) at 30 % and 60 % together,
# and one container of two gemm processes (one state file) at 30 %.
#
# In-process runs (the *_phased parts): one process under
# GPU_CORE_UTILIZATION_POLICY=default runs unthrottled, throttled for SECONDS+2,
# then unthrottled again, switch-phases playing the node agent that sets and
# clears utilization_switch; its throttled seconds are judged against its own
# unthrottled ones. On this machine two runs of one launch-bound program
# differ by up to 30 %, which no reference from another process can remove.
# The launch_interleaved part alternates 3 s unthrottled and 4 s throttled
# six times, each throttled second judged against the phases either side.
# And the hook's cost with no binding share, inside one process: launches
# through the pointer the runtime is given against the driver's own function
# (hook_bench launch_ab), 15 processes per condition, with an A/A control.
#
# Environment: SM_LIMIT_PARTS (default: gemm launch launch_ptds graph pair
# procs launch_phased launch_ptds_phased gemm_phased overhead; also
# launch_interleaved), SM_LIMIT_LAUNCH_ROUNDS, SM_LIMIT_PHASED_ROUNDS and
# SM_LIMIT_INTERLEAVED_ROUNDS (rounds of all limits, default 1), SM_LIMIT_PIN
# (the cores of the measured programs, taskset -c syntax, default 2),
# SM_LIMIT_PHASED_LIMITS (default 10 30 50 70 90), SM_LIMIT_AB_ROUNDS (default
# 15), SM_LIMIT_LOG_LEVEL (LIBCUDA_LOG_LEVEL of the limited runs, default 3).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
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
nvcc -O2 -arch=sm_90 -o "$build/hook_bench" bench/overhead/hook_bench.cu -ldl || exit 1
cmake --build "$build" -j "$(nproc)" --target switch-phases >/dev/null || exit 1
switch_phases=$build/bench/sm_limit/switch-phases
work=$(mktemp -d)
raw="$out/sm-limit-raw.jsonl"
: > "$raw"
logs="$out/sm-limit-logs.txt"
: > "$logs"
# SM clock and power beside every run: a GPU with power to spare runs a lone,
# throttled tenant's kernels at higher clocks than an unlimited one's.
# The measured programs get the cores of SM_LIMIT_PIN (default 2), the
# helpers (this sampler, switch-phases) core 0, so a helper never takes a
# measured program's core.
helper_pin=()
command -v taskset >/dev/null && helper_pin=(taskset -c 0)
"${helper_pin[@]}" python3 bench/sm_limit/gpu_sampler.py "$out/sm-limit-clocks.tsv" &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT

# 4 logs each back-to-back sample of a launch-bound program (docs/sm-limiter.md).
log_level=${SM_LIMIT_LOG_LEVEL:-3}

# One core for every run, so the scheduler moving the launching thread adds
# no noise of its own.
pin=()
command -v taskset >/dev/null && pin=(taskset -c "${SM_LIMIT_PIN:-2}")

command_for() {  # workload [seconds]
  local t=${2:-$secs}
  case $1 in
    gemm | graph) echo "python3 bench/sm_limit/workload.py $1 $t" ;;
    launch) echo "$build/launch_bench $t" ;;
    launch_ptds) echo "$build/launch_bench_ptds $t" ;;
  esac
}

run() {  # workload limit(0 = bare) tag [state file]
  local env=()
  if [ "$2" != 0 ]; then
    env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT="$2" LIBCUDA_LOG_LEVEL="$log_level"
         CUDA_DEVICE_MEMORY_SHARED_CACHE="${4:-$work/$1-$2-$3-$RANDOM.cache}")
  fi
  local line t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046  # the command is words without spaces
  line=$(env "${env[@]}" "${pin[@]}" $(command_for "$1") 2>>"$logs" | tail -1)
  t1=$(date +%s.%N)
  echo "{\"workload\": \"$1\", \"limit\": $2, \"tag\": \"$3\", \"t0\": $t0, \"t1\": $t1, \"result\": $line}" >> "$raw"
}

# Unthrottled 5 s, throttled $secs+2 s, then unthrottled to the end of a
# $secs+13 s run. The throttled phase's first whole second is the limiter's
# start (what a fresh process does before its first second is counted: the
# first samples, the first sustain run); the next $secs are judged. The program's first CUDA call
# creates the state file (switch 1, the file's initial value); switch-phases
# clears the switch as soon as the file is there.
phased="$out/sm-limit-phased-raw.jsonl"
: > "$phased"
run_phased() {  # workload limit tag [steps program-seconds]
  local cache="$work/phased-$1-$2-$3-$RANDOM.cache" sw="$work/switches-$RANDOM" line
  local steps=${4:-"0:5 1:$((secs + 2)) 0:0"} length=${5:-$((secs + 13))}
  # shellcheck disable=SC2086  # steps are words
  "${helper_pin[@]}" "$switch_phases" "$cache" $steps > "$sw" 2>>"$logs" &
  local sw_pid=$!
  # shellcheck disable=SC2046  # the command is words without spaces
  line=$(env LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT="$2" GPU_CORE_UTILIZATION_POLICY=default \
    LIBCUDA_LOG_LEVEL="$log_level" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" "${pin[@]}" \
    $(command_for "$1" "$length") 2>>"$logs" | tail -1)
  wait "$sw_pid"
  echo "{\"workload\": \"$1\", \"limit\": $2, \"tag\": \"$3\", \"switches\": [$(paste -sd, "$sw")], \"result\": $line}" >> "$phased"
}

# SM_LIMIT_PARTS picks parts of the run (all by default).
parts=" ${SM_LIMIT_PARTS:-gemm launch launch_ptds graph pair procs launch_phased launch_ptds_phased gemm_phased overhead} "
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

if want procs; then
run gemm 0 procs-before
# One container of two processes: one state file (and .pace file beside it),
# one share of 30 % between them.
# Each runs 2 s longer than the others: their starts differ by up to a
# second (PyTorch's start-up), and they are judged over the time both ran.
shared="$work/procs-$RANDOM.cache"
secs_alone=$secs
secs=$((secs + 2))
run gemm 30 procs "$shared" &
procs1=$!
run gemm 30 procs "$shared" &
procs2=$!
wait $procs1 $procs2
secs=$secs_alone
run gemm 0 procs-after
fi

# SM_LIMIT_PHASED_ROUNDS rounds of all limits, in-process.
want launch_phased && for round in $(seq "${SM_LIMIT_PHASED_ROUNDS:-1}"); do
  for l in ${SM_LIMIT_PHASED_LIMITS:-10 30 50 70 90}; do run_phased launch "$l" "r$round"; done
done
want launch_ptds_phased && run_phased launch_ptds 30 r1
# Interleaved: 3 s unthrottled and 4 s throttled, six times, then
# unthrottled. Each throttled second is judged against the unthrottled phases
# either side of its own, 3 s away instead of up to 12: the host's speed moves
# in phases of seconds, and this reference follows it more closely.
interleaved_steps="$(for _ in 1 2 3 4 5 6; do printf '0:3 1:4 '; done)0:0"
want launch_interleaved && for round in $(seq "${SM_LIMIT_INTERLEAVED_ROUNDS:-1}"); do
  for l in ${SM_LIMIT_PHASED_LIMITS:-10 30 50 70 90}; do
    run_phased launch "$l" "il-r$round" "$interleaved_steps" 49
  done
done
# The compute-bound program both ways: where the host does not matter, the
# in-process and the cross-process reference must agree.
want gemm_phased && for l in 30 70; do run_phased gemm "$l" r1; done

# The hook's cost per launch with no binding share, inside one process.
# unset: nothing configured, so the runtime is given the driver's own pointer;
# sm100: a state file and a share of 100 (every launch marks the container
# active); default-idle: a 30 % share under the default policy, not enforced
# because no other container is busy (the usual case on a node).
ab="$out/sm-limit-overhead-raw.tsv"
rounds=${SM_LIMIT_AB_ROUNDS:-15}
want overhead || rounds=0
printf 'round\tcondition\thooked\tdriver\tdriver2\thooked_is_driver\n' > "$ab"
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<< "$line"; }
for r in $(seq "$rounds"); do
  for c in $(printf '%s\n' unset sm100 default-idle | shuf); do
    cache="$work/ab-$RANDOM.cache"
    case $c in
      unset) env=(LD_PRELOAD="$lib") ;;
      sm100) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=100 CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache") ;;
      default-idle)
        # The file exists with its switch cleared before the program starts.
        env LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=30 CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
          "$build/hook_bench" meminfo >/dev/null
        "$switch_phases" "$cache" 0:0 >/dev/null
        env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=default
             CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache") ;;
    esac
    line=$(env "${env[@]}" "${pin[@]}" "$build/hook_bench" launch_ab)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$(field hooked)" "$(field driver)" \
      "$(field driver2)" "$(field hooked_is_driver)" >> "$ab"
  done
done
kill $sampler 2>/dev/null
python3 bench/sm_limit/summarize.py "$raw" "$ab" "$out/sm-limit-clocks.tsv" > "$out/sm-limit-summary.txt"
python3 bench/sm_limit/summarize_phased.py "$phased" >> "$out/sm-limit-summary.txt"
cat "$out/sm-limit-summary.txt"
