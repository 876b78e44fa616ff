#!/usr/bin/env bash
# Exploration: what the limiter measures of a launch-bound program at each
# share (debug log of every back-to-back run), beside the bare program's rate.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/launch-samples}
mkdir -p "$out"
# shellcheck source=tests/gpu/explore/build_launch.sh
. tests/gpu/explore/build_launch.sh
secs=${SECS:-6}
for l in ${LIMITS:-30 90 10 50}; do
  echo "bare $(taskset -c 2 "$build/launch_bench" "$secs")" >> "$out/rates.txt"
  echo "$l $(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=$l LIBCUDA_LOG_LEVEL=4 \
    CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/ls-$l-$RANDOM.cache taskset -c 2 "$build/launch_bench" "$secs" \
    2>"$out/log-$l.txt")" >> "$out/rates.txt"
done
echo "bare $(taskset -c 2 "$build/launch_bench" "$secs")" >> "$out/rates.txt"
python3 - "$out" <<'PY' > "$out/summary.txt"
import re, statistics, sys, glob
out = sys.argv[1]
for f in sorted(glob.glob(out + "/log-*.txt")):
    gpu, host, behind, est = [], [], 0, []
    for line in open(f):
        m = re.search(r"run of (\d+) launches, ([\d.]+) us each on the GPU, ([\d.]+) on the host( \(GPU behind\))?; estimate ([\d.]+)", line)
        if not m: continue
        gpu.append(float(m[2])); host.append(float(m[3])); est.append(float(m[5]))
        behind += m[4] is not None
    if not gpu: print(f, "no runs"); continue
    q = lambda v: "p10 %.2f p50 %.2f p90 %.2f" % tuple(statistics.quantiles(v, n=10)[i] for i in (0, 4, 8))
    print(f.split("/")[-1], "runs", len(gpu), "GPU behind", behind)
    print("  gpu/launch ", q(gpu)); print("  host/launch", q(host))
    print("  estimate at 10/50/90 % of the run:", ["%.2f" % est[int(len(est) * k)] for k in (0.1, 0.5, 0.9)], "last %.2f" % est[-1])
    for line in open(f):
        if "SM share" in line and "launches" in line: print(" ", line.strip()[-200:])
PY
cat "$out/rates.txt" "$out/summary.txt"
