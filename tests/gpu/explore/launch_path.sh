#!/usr/bin/env bash
# Exploration: where a launch-bound program's time goes under an SM share.
# 1. The host: CPUs, frequency governor, steal time, perf.
# 2. Noise of the bare launch-bound workload, pinned to core 2, core 9, unpinned.
# 3. The hook's per-launch cost, best of many short batches: bare, library
#    loaded (unset), limit 100, limit 99 (paced, rarely waits), 99 without
#    sustain runs.
#    (NOISE=0 skips part 2.)
# 4. perf profile of the paced path, if perf is installed.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/launch-path}
mkdir -p "$out"
# shellcheck source=tests/gpu/explore/build_launch.sh
. tests/gpu/explore/build_launch.sh
nvcc -O2 -arch=sm_90 -o "$build/hook_bench" bench/overhead/hook_bench.cu || exit 1
{
  echo "## host"; nproc; lscpu | grep -i "model name\|mhz\|numa\|hypervisor\|thread"
  cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1 | head -1
  grep '^cpu ' /proc/stat; command -v perf || echo "no perf"; uptime
} > "$out/host.txt" 2>&1
echo "## noise: bare launch_bench 5 s" > "$out/noise.txt"
[ "${NOISE:-1}" = 0 ] || for r in 1 2 3; do
  for p in c2 c9 none; do
    case $p in c2) pin=(taskset -c 2) ;; c9) pin=(taskset -c 9) ;; none) pin=() ;; esac
    s0=$(grep '^cpu ' /proc/stat)
    echo "$r $p $("${pin[@]}" "$build/launch_bench" 5) steal: $s0 -> $(grep '^cpu ' /proc/stat)" >> "$out/noise.txt"
  done
done
echo "## per-launch cost, best of 30 batches of 5000 empty launches (ops/s)" > "$out/cost.txt"
for r in $(seq 5); do
  for c in bare unset sm100 sm99 sm99nosus sm90; do
    case $c in
      bare) env=() ;;
      unset) env=(LD_PRELOAD="$lib") ;;
      sm100) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=100) ;;
      sm99) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=99) ;;
      sm99nosus) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=99 CUDA_DEVICE_SM_SUSTAIN_MS=0) ;;
      sm90) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=90) ;;
    esac
    v=$(env "${env[@]}" CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/lp-$RANDOM.cache LIBCUDA_LOG_LEVEL=3 \
      taskset -c 2 "$build/hook_bench" launch 2>>"$out/cost-logs.txt")
    echo "$r $c $v" >> "$out/cost.txt"
  done
done
if command -v perf >/dev/null; then
  for c in 100 99; do
    LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=$c CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/lp-perf.cache \
      taskset -c 2 perf record -g -o "$out/perf-$c.data" "$build/launch_bench" 4 >/dev/null 2>&1
    perf report -i "$out/perf-$c.data" --no-children --sort dso,symbol --stdio 2>/dev/null | head -80 > "$out/perf-$c.txt"
    rm -f "$out/perf-$c.data"
  done
fi
