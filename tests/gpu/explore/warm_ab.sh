#!/usr/bin/env bash
# Exploration: does a launch-bound program at a low share lose throughput to
# cold runs after each sleep? A/B of libvgpu.so as committed against a build
# with longer runs between sleeps and more launches before a run is sampled
# (kBatchNs / kWarmLaunches in launch_hooks.cpp, set by WARM and BATCH_MS).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/warm-ab}
mkdir -p "$out"
# shellcheck source=tests/gpu/explore/build_launch.sh
. tests/gpu/explore/build_launch.sh
variant=/tmp/variant
copy_sources "$variant"
sed -i "s/constexpr uint32_t kWarmLaunches = 32;/constexpr uint32_t kWarmLaunches = ${WARM:-96};/; s/constexpr int64_t kBatchNs = 2'000'000;/constexpr int64_t kBatchNs = ${BATCH_MS:-4}'000'000;/" \
  "$variant/src/vgpu/launch_hooks.cpp"
grep -n "kWarmLaunches =\|kBatchNs =" "$variant/src/vgpu/launch_hooks.cpp" > "$out/variant.txt"
build_vgpu "$variant" "$variant/build" || exit 1
secs=${SECS:-8}
run() {  # tag lib limit
  if [ "$2" = none ]; then
    echo "$1 $(taskset -c 2 "$build/launch_bench" "$secs")" >> "$out/ab.txt"
  else
    echo "$1 $(LD_PRELOAD="$2" CUDA_DEVICE_SM_LIMIT=$3 CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/ab-$RANDOM.cache \
      taskset -c 2 "$build/launch_bench" "$secs" 2>>"$out/logs.txt")" >> "$out/ab.txt"
  fi
}
for r in $(seq "${ROUNDS:-3}"); do
  for l in ${LIMITS:-30 10}; do
    run bare none 0
    run "cur-$l" "$lib" "$l"
    run "var-$l" "$variant/build/src/libvgpu.so" "$l"
  done
done
run bare none 0
python3 - "$out/ab.txt" <<'PY'
import json, sys, statistics
rows = [(l.split(" ", 1)[0], json.loads(l.split(" ", 1)[1])["rate"]) for l in open(sys.argv[1])]
res = {}
for i, (tag, rate) in enumerate(rows):
    if tag == "bare": continue
    # against the bare runs either side
    before = next(r for t, r in reversed(rows[:i]) if t == "bare")
    after = next(r for t, r in rows[i:] if t == "bare")
    res.setdefault(tag, []).append(100 * rate / ((before + after) / 2))
for tag, v in sorted(res.items()):
    print(f"{tag:8s} median {statistics.median(v):6.2f}%  rounds {', '.join('%.2f' % x for x in v)}")
PY
