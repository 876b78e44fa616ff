#!/usr/bin/env bash
# Exploration: what period should a launch-bound program be charged? Each run
# is one process judged against itself (bench/sm_limit/run.sh's in-process
# runs: GPU_CORE_UTILIZATION_POLICY=default, switch-phases clearing, setting
# and clearing utilization_switch), with LIBCUDA_LOG_LEVEL=4 (or $LOG_LEVEL)
# so every back-to-back sample's GPU and host period is logged (debug logging
# slows the program: LOG_LEVEL=3 where the variants log differently, as when
# one samples unthrottled phases and the other does not). Variants of libvgpu.so:
#   cur    as committed
#   w256   back-to-back samples of 256 launches instead of 16
#   spin   w256, and waits spin on the clock instead of sleeping
#   nobatch  no batches of light launches (LimiterOptions::batch_ns = 0)
#   prev   the tree with the patch in $PREV_PATCH reversed (the change under
#          test against what it changes: git diff HEAD -- src > some.patch)
# Prints per run: the achieved share, the unthrottled period (1 / the
# unthrottled rate), the period the throttled rate implies was charged, and the
# medians of the samples' GPU and host periods.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
out=${OUT:-/tmp/phased-ab}
mkdir -p "$out"
# shellcheck source=tests/gpu/explore/build_launch.sh
. tests/gpu/explore/build_launch.sh
cmake --build "$build" -j "$(nproc)" --target switch-phases >/dev/null || exit 1
declare -A libs=([cur]=$lib)
make_variant() {  # name sed-for-launch_limiter.hpp [sed-for-launch_hooks.cpp [patch-to-reverse]]
  local v=/tmp/variant-$1
  copy_sources "$v"
  [ -n "$2" ] && sed -i "$2" "$v/src/vgpu/limiter/launch_limiter.hpp"
  [ -n "${3:-}" ] && sed -i "$3" "$v/src/vgpu/launch_hooks.cpp"
  [ -n "${4:-}" ] && { (cd "$v" && git apply -R) < "$4" || exit 1; }
  build_vgpu "$v" "$v/build" || exit 1
  libs[$1]=$v/build/src/libvgpu.so
}
variants=${VARIANTS:-cur w256 spin}
window='s/int stream_window = 16;/int stream_window = 256;/'
[[ " $variants " == *" w256 "* ]] && make_variant w256 "$window"
[[ " $variants " == *" spin "* ]] && make_variant spin "$window" \
  's/::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);/(void)ts; while (mono_ns() < until) {}/'
[[ " $variants " == *" nobatch "* ]] &&
  make_variant nobatch "s/int64_t batch_ns = 200'000;/int64_t batch_ns = 0;/"
[[ " $variants " == *" prev "* ]] && make_variant prev "" "" "${PREV_PATCH:?prev needs PREV_PATCH}"
grep -h "batch_ns =\|stream_window =\|while (mono_ns() < until)" /tmp/variant-*/src/vgpu/limiter/launch_limiter.hpp \
  /tmp/variant-*/src/vgpu/launch_hooks.cpp > "$out/variants.txt" 2>/dev/null
# Logs stay out of $OUT until the end (a device run brings back a few files).
logs=/tmp/phased-ab-logs
rm -rf "$logs" && mkdir -p "$logs"

secs=${SECS:-10}
: > "$out/runs.jsonl"
for r in $(seq "${ROUNDS:-1}"); do
  for l in ${LIMITS:-10 30 70}; do
    for v in $variants; do
      cache=/tmp/phased-$v-$l-$r-$RANDOM.cache
      log=$logs/log-$v-$l-$r.txt
      "$build/bench/sm_limit/switch-phases" "$cache" 0:5 "1:$((secs + 2))" 0:0 > /tmp/sw.txt &
      sw=$!
      line=$(LD_PRELOAD="${libs[$v]}" CUDA_DEVICE_SM_LIMIT=$l GPU_CORE_UTILIZATION_POLICY=default \
        LIBCUDA_LOG_LEVEL="${LOG_LEVEL:-4}" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" taskset -c 2 \
        "$build/launch_bench" $((secs + 13)) 2>"$log" | tail -1)
      wait $sw
      echo "{\"workload\": \"launch\", \"limit\": $l, \"tag\": \"$v-r$r\", \"switches\": [$(paste -sd, /tmp/sw.txt)], \"result\": $line}" >> "$out/runs.jsonl"
    done
  done
done
python3 bench/sm_limit/summarize_phased.py "$out/runs.jsonl" > "$out/summary.txt"
python3 - "$out" "$logs" >> "$out/summary.txt" <<'PY'
import json, os, re, statistics, sys
out, logs = sys.argv[1], sys.argv[2]
print("\n# per run: unthrottled period, charged period (limit / throttled rate), samples")
print(f"{'run':16} {'U us':>6} {'charged':>8} {'GPU med':>8} {'host med':>9} {'last est':>9} {'samples':>8}")
sys.path.insert(0, "bench/sm_limit")
from summarize_phased import split_seconds
for line in open(os.path.join(out, "runs.jsonl")):
    row = json.loads(line)
    before, thr, after = split_seconds(row)
    u = statistics.mean(before + after)
    charged = row["limit"] / 100 / statistics.mean(thr[1:]) * 1e6
    v, rnd = row["tag"].rsplit("-", 1)
    log = open(os.path.join(logs, f"log-{v}-{row['limit']}-{rnd[1:]}.txt")).read()
    runs = re.findall(r"([\d.]+) us each on the GPU, ([\d.]+) on the host.*?estimate ([\d.]+)", log)
    gpu = statistics.median(float(g) for g, _, _ in runs) if runs else float("nan")
    host = statistics.median(float(h) for _, h, _ in runs) if runs else float("nan")
    est = float(runs[-1][2]) if runs else float("nan")
    print(f"{row['tag'] + ' ' + str(row['limit']):16} {1e6 / u:6.2f} {charged:8.2f} {gpu:8.2f} "
          f"{host:9.2f} {est:9.2f} {len(runs):8d}")
PY
cat "$out/summary.txt"
tar czf "$out/logs.tgz" -C "$logs" .
