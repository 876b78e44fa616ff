#!/usr/bin/env bash
# libvgpu.so overhead on a GPU, A/B interleaved with an A/A control:
#   bench/overhead/run.sh [ROUNDS] [OUTDIR]
# Conditions, each a fresh process per workload and round, in a shuffled order
# every round:
#   bare      no preload
#   bare2     no preload again (the A/A control: how noisy the machine is)
#   nolimit   libvgpu.so preloaded, nothing configured (pass-through)
#   limit     libvgpu.so preloaded, a 64 GiB limit (accounting on, not binding)
# Writes raw rates and a summary (medians, ratios to bare) to OUTDIR.
set -uo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-15}
out=${2:-${OUT:-/tmp/bench-results}}
mkdir -p "$out"
raw="$out/overhead-raw.tsv"
. bench/gpu_build.sh  # sets build, lib, vgpu
nvcc -O2 -arch=sm_90 -o "$build/hook_bench" bench/overhead/hook_bench.cu || exit 1
work=$(mktemp -d)

run_one() {  # condition workload
  local env=()
  case $1 in
    nolimit) env=(LD_PRELOAD=$lib) ;;
    limit) env=(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=64g
                CUDA_DEVICE_MEMORY_SHARED_CACHE=$work/bench-$RANDOM.cache) ;;
  esac
  if [ "$2" = torch_add ]; then
    env "${env[@]}" python3 bench/overhead/torch_ops.py
  else
    env "${env[@]}" "$build/hook_bench" "$2"
  fi | sed -n 's/.*ops_per_s=\([0-9.]*\).*/\1/p'
}

printf 'round\tcondition\tworkload\tops_per_s\n' > "$raw"
for r in $(seq "$rounds"); do
  for w in launch malloc meminfo torch_add; do
    for c in $(printf '%s\n' bare bare2 nolimit limit | shuf); do
      printf '%s\t%s\t%s\t%s\n' "$r" "$c" "$w" "$(run_one "$c" "$w")" >> "$raw"
    done
  done
done

python3 - "$raw" > "$out/overhead-summary.txt" <<'PY'
import collections, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
rates = collections.defaultdict(list)
for r, c, w, v in rows:
    if v:
        rates[(w, c)].append(float(v))
print("workload    condition  rounds  median ops/s   ratio to bare (median of per-round ratios)  min..max ratio")
for w in ["launch", "malloc", "meminfo", "torch_add"]:
    base = {int(r): float(v) for r, c, ww, v in rows if ww == w and c == "bare" and v}
    for c in ["bare", "bare2", "nolimit", "limit"]:
        per_round = [float(v) / base[int(r)] for r, cc, ww, v in rows
                     if ww == w and cc == c and v and int(r) in base]
        med = statistics.median(rates[(w, c)]) if rates[(w, c)] else float("nan")
        if per_round:
            print(f"{w:<11} {c:<10} {len(per_round):>6}  {med:>13.1f}   {statistics.median(per_round):>6.3f}"
                  f"{'':>38}{min(per_round):.3f}..{max(per_round):.3f}")
PY
cat "$out/overhead-summary.txt"
rm -rf "$work"
