#!/usr/bin/env bash
# A/B of the hook's cost while a share is not enforced (a 30 % share under the
# default policy, utilization_switch cleared: the usual case on a node), for
# libvgpu.so as committed (cur) against the tree with $PREV_PATCH reversed
# (prev). Each process runs hook_bench launch_ab: the hooked launch rate
# against the driver's own function inside that process, with an A/A arm.
# Rounds alternate the two libraries in a shuffled order.
#   PREV_PATCH=some.patch ROUNDS=15 tests/gpu/explore/idle_ab.sh
# Prints one line per process, then the median ratio per library.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
out=${OUT:-/tmp/idle-ab}
mkdir -p "$out"
# shellcheck source=tests/gpu/explore/build_launch.sh
. tests/gpu/explore/build_launch.sh
cmake --build "$build" -j "$(nproc)" --target switch-phases >/dev/null || exit 1
nvcc -O2 -arch=sm_90 -o "$build/hook_bench" bench/overhead/hook_bench.cu -ldl || exit 1
v=/tmp/variant-prev
copy_sources "$v"
(cd "$v" && git apply -R) < "${PREV_PATCH:?PREV_PATCH: the change under test, as a patch}" || exit 1
build_vgpu "$v" "$v/build" || exit 1
declare -A libs=([cur]=$lib [prev]=$v/build/src/libvgpu.so)
raw=$out/idle-ab-raw.tsv
printf 'round\tlib\thooked\tdriver\tdriver2\n' > "$raw"
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<< "$line"; }
for r in $(seq "${ROUNDS:-15}"); do
  for name in $(printf '%s\n' cur prev | shuf); do
    cache=/tmp/idle-ab-$RANDOM.cache
    # The file exists with its switch cleared before the program starts.
    env LD_PRELOAD="${libs[$name]}" CUDA_DEVICE_SM_LIMIT=30 CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
      "$build/hook_bench" meminfo >/dev/null
    "$build/bench/sm_limit/switch-phases" "$cache" 0:0 >/dev/null
    line=$(env LD_PRELOAD="${libs[$name]}" CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=default \
      CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" taskset -c 2 "$build/hook_bench" launch_ab)
    printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$(field hooked)" "$(field driver)" \
      "$(field driver2)" >> "$raw"
  done
done
python3 - "$raw" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
for name in ("cur", "prev"):
    mine = [r for r in rows if r["lib"] == name]
    ab = [float(r["hooked"]) / float(r["driver"]) for r in mine]
    aa = [float(r["driver2"]) / float(r["driver"]) for r in mine]
    print(f"{name:5} {len(mine):3d} processes  hooked/driver median {statistics.median(ab):.4f} "
          f"({min(ab):.3f}..{max(ab):.3f})  A/A median {statistics.median(aa):.4f} "
          f"({min(aa):.3f}..{max(aa):.3f})")
PY
