#!/usr/bin/env bash
# Interleaved A/B (and A/A) of two scheduler-bench binaries: each round runs
# B, A, B again, so the B/B ratio shows how much the machine alone moves the
# numbers. Prints per-round values and the medians and ratios.
#
#   bench/scheduler/ab.sh OLD_BENCH NEW_BENCH [ROUNDS]   (default 7 rounds)
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = --help ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
old=$1 new=$2 rounds=${3:-7}
filter='BM_Filter/|BM_Prioritize/|BM_Cycle/5000'
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  for side in new old new2; do
    bin=$new
    [ "$side" = old ] && bin=$old
    "$bin" --benchmark_filter="$filter" --benchmark_min_time=1 --benchmark_format=json \
      >"$out/$side-$r.json" 2>/dev/null
  done
  echo "round $r done" >&2
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
keys = [("BM_Cycle/5000/manual_time", "pods_per_s"), ("BM_Cycle/5000/manual_time", "p50_ms"),
        ("BM_Cycle/5000/manual_time", "p99_ms"), ("BM_Filter/real_time", "p99_ms"),
        ("BM_Prioritize/real_time", "p99_ms")]
vals = {s: {k: [] for k in keys} for s in ("old", "new", "new2")}
for s in vals:
    for r in range(1, rounds + 1):
        data = json.load(open(f"{out}/{s}-{r}.json"))
        by = {b["name"]: b for b in data["benchmarks"]}
        for k in keys:
            vals[s][k].append(by[k[0]][k[1]])
print("%-40s %10s %10s %10s %8s %8s" % ("metric (median of %d rounds)" % rounds, "old", "new", "new again", "new/old", "A/A"))
for k in keys:
    o, n, n2 = (statistics.median(vals[s][k]) for s in ("old", "new", "new2"))
    print("%-40s %10.3f %10.3f %10.3f %8.2f %8.2f" % (k[0].split("/")[0] + " " + "/".join(k[0].split("/")[1:2]) + " " + k[1], o, n, n2, n / o, n2 / n))
print()
for k in keys:
    print("%s %s per round: old %s" % (k[0], k[1], " ".join("%.3f" % v for v in vals["old"][k])))
    print("%s %s per round: new %s" % (k[0], k[1], " ".join("%.3f" % v for v in vals["new"][k])))
    print("%s %s per round: new again %s" % (k[0], k[1], " ".join("%.3f" % v for v in vals["new2"][k])))
PY
rm -rf "$out"
