#!/usr/bin/env bash
# What bus bandwidth a share can give an NCCL all-reduce at all, beside what
# libvgpu.so gives, on a 2-GPU machine (issue 35 point 2):
#   tests/gpu/nccl_share_bound.sh [OUTDIR]
# In NB_ROUNDS (2) rounds, in a random order per round: the loop bare; the
# loop bare with --duty S (the ranks idle together after each chunk so that
# they all-reduce S % of the wall time: a perfect pacer in phase), with chunks
# of 100 ms and of 10 ms of work (a pacer's burst is 20 ms of wall time); and
# the loop under libvgpu.so at share S, policy force. S in NB_SHARES ("30 50").
# Each run NB_SECONDS (8) of loop. Prints one line per run, then medians.
# NCCL_NVLS_ENABLE=0 (no NVLink multicast objects).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-${OUT:-/tmp/gpu-results}}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
ngpu=$(nvidia-smi -L | wc -l)
[ "$ngpu" -ge 2 ] || { echo "SKIP: needs 2 GPUs, this machine has $ngpu"; exit 0; }
if [ -z "${NB_LIB:-}" ]; then
  . bench/gpu_build.sh
else
  lib=$NB_LIB
fi
secs=${NB_SECONDS:-8}
work=$(mktemp -d)
raw=$out/nccl-bound-raw.txt
: > "$raw"
{
  echo "# tests/gpu/nccl_share_bound.sh, $(date -u +%FT%TZ), commit ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | sed 's/^/# GPU /'
  echo "# 256 MiB all-reduce, 2 ranks, $secs s a run, NCCL_NVLS_ENABLE=0"
} > "$out/nccl-bound.txt"
conds="bare"
for s in ${NB_SHARES:-30 50}; do conds+=" duty$s-100ms duty$s-10ms lib$s"; done
for r in $(seq "${NB_ROUNDS:-2}"); do
  for c in $(printf '%s\n' $conds | shuf); do
    env=() args=()
    case $c in
      bare) ;;
      duty*) s=${c#duty}; s=${s%%-*}; ms=${c##*-}; ms=${ms%ms}
             args=(--duty "$s" --chunk-seconds "$(awk -v m="$ms" 'BEGIN { print m / 1000 }')") ;;
      lib*) env=(LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT="${c#lib}" GPU_CORE_UTILIZATION_POLICY=force
                 CUDA_DEVICE_MEMORY_SHARED_CACHE="$work/$c-$r.cache") ;;
    esac
    line=$(timeout -k 10 180 env ${env[@]+"${env[@]}"} python3 tests/gpu/nccl_allreduce.py \
      --nproc 2 --seconds "$secs" ${args[@]+"${args[@]}"} 2> "$work/err" | grep '^result ' | tail -1)
    [ -n "$line" ] || { line="result none"; tail -3 "$work/err" | sed 's/^/  | /'; }
    echo "r$r $c $line" | tee -a "$raw"
  done
done
python3 - "$raw" >> "$out/nccl-bound.txt" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for l in open(sys.argv[1]):
    parts = l.split()
    kv = dict(p.split("=", 1) for p in parts[3:] if "=" in p)
    if kv.get("ok") == "1":
        runs[parts[1]].append(kv)
bare = statistics.median(float(k["busbw"]) for k in runs.get("bare", [{"busbw": "nan"}]))
print(f"{'run':16} {'n':>2} {'busbw GB/s':>11} {'of bare':>8} {'NVML GPU0/GPU1 %':>17}")
for c in sorted(runs, key=lambda c: (c != "bare", c)):
    k = runs[c]
    bw = statistics.median(float(x["busbw"]) for x in k)
    u0 = statistics.median(float(x["util0"]) for x in k)
    u1 = statistics.median(float(x["util1"]) for x in k)
    print(f"{c:16} {len(k):2d} {bw:11.1f} {100 * bw / bare:7.1f}% {u0:8.1f} / {u1:5.1f}"
          "   [" + ", ".join(f"{float(x['busbw']):.0f}" for x in k) + "]")
EOF
cat "$out/nccl-bound.txt"
