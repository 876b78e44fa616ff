#!/usr/bin/env bash
# The real-GPU suite for libvgpu.so (run on an H100/H200 machine):
#   tests/gpu/run.sh [OUTDIR]
# Builds libvgpu.so and the test programs, runs every check, and writes what it
# printed to OUTDIR/gpu-suite.txt (default $OUT or /tmp/gpu-results). Each check
# prints PASS or FAIL; the script exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/gpu-results}}
mkdir -p "$out"
exec > >(tee "$out/gpu-suite.txt") 2>&1

fails=0
# GPU_SUITE_ONLY=<section> runs one section (torch, runtime, driver, fill,
# escape, capture, smi, two) after the build, e.g. to re-check one change.
want() { [ -z "${GPU_SUITE_ONLY:-}" ] || [ "$GPU_SUITE_ONLY" = "$1" ]; }
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
MiB=$((1 << 20))

echo "# libvgpu.so real-GPU suite, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${GIT_COMMIT:-unknown}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "# CUDA: $(nvcc --version | tail -1)"
echo "# PyTorch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')"

build=build/gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHAMI_BUILD_TESTS=OFF -DHAMI_WERROR=OFF -DHAMI_LIBVGPU_ONLY=ON >/dev/null &&
  cmake --build "$build" -j "$(nproc)" --target vgpu_lib vgpu >/dev/null || { echo "FAIL build"; exit 1; }
lib=$PWD/$build/src/libvgpu.so
export VGPU_BIN=$PWD/$build/src/vgpu
bin=$build/gpu-bin
mkdir -p "$bin"
g++ -O2 -std=c++20 -Isrc tests/vgpu/cuda_client.cpp src/region/*.cpp src/common/*.cpp \
  -o "$bin/cuda-client" -L/usr/local/nvidia/lib64 -lcuda -ldl -lpthread || { echo "FAIL client build"; exit 1; }
nvcc -cubin -arch=sm_90 -DGLOBALS_MODULE -o "$bin/globals.cubin" tests/gpu/probe/driver_facts.cu &&
  nvcc -O2 -arch=sm_90 -cudart shared -o "$bin/rp-shared" tests/gpu/runtime_paths.cu &&
  nvcc -O2 -arch=sm_90 -cudart static -o "$bin/rp-static" tests/gpu/runtime_paths.cu &&
  nvcc -O2 -arch=sm_90 -cudart static --default-stream per-thread -o "$bin/rp-ptds" tests/gpu/runtime_paths.cu ||
  { echo "FAIL nvcc"; exit 1; }

work=$(mktemp -d)
n=0
# A fresh "container" per check: its own state file.
container() {
  n=$((n + 1))
  export CUDA_DEVICE_MEMORY_SHARED_CACHE=$work/c$n.cache
}

if want torch; then
echo
echo "## PyTorch allocates until OutOfMemoryError under a 4 GiB limit"
for conf in "" "expandable_segments:True"; do
  container
  r=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=4g PYTORCH_CUDA_ALLOC_CONF=$conf python3 tests/gpu/torch_limit.py)
  rc=$?
  echo "$r"
  [ $rc -eq 0 ] && pass "torch 4g ${conf:-default allocator}" || fail "torch 4g ${conf:-default allocator}"
done
fi

if want runtime; then
echo
echo "## CUDA runtime: every allocation path against a 2 GiB limit (shared, static, per-thread stream)"
for variant in shared static ptds; do
  for path in malloc pitch managed async pool array array3d mipmap; do
    container
    line=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=2g "$bin/rp-$variant" $path)
    echo "$variant $line"
    # Refused with the runtime's out-of-memory only when what the limit leaves
    # cannot hold one more item, never past the limit, and everything came
    # back when freed.
    echo "$line" | awk -v v="$variant" -v M=$MiB '{
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      ok = f["error"] == "cudaErrorMemoryAllocation" && f["total"] == 2048 * M &&
           f["items"] * f["item"] <= f["free_before"] && f["free_when_full"] < f["item"] &&
           f["free_after_free"] >= f["free_before"] - 2 * M
      exit ok ? 0 : 1 }' && pass "runtime $variant $path" || fail "runtime $variant $path"
  done
done
fi

if want driver; then
echo
echo "## Driver API: charged vs what the driver commits (NVML, this process), every path and lookup route"
ops=(alloc:64m pitch:1000x3000 managed:10m async:6m pool:0:4m vmm:0:8m array:1024x1024
     array3d:100x100x100 mipmap:1024x1024:3)
for via in link dlsym procaddr procaddr-ptds; do
  container
  args=(--via=$via init ctx:0 charged:0 procmem:0)
  for op in "${ops[@]}"; do args+=("$op" charged:0 procmem:0); done
  out_lines=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=8g "$bin/cuda-client" "${args[@]}")
  echo "$out_lines" | awk -v via=$via -v M=$MiB '
    /^op=charged/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); c[kv[1]] = kv[2] } charged = c["total"]; ctx = c["context"] }
    /^op=procmem/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); p[kv[1]] = kv[2] } used = p["used"];
      if (op != "") {
        dc = charged - pc; du = used - pu
        printf "  %-14s %-22s rc=%s charged %+8.2f MiB  driver %+8.2f MiB\n", via, op, rc, dc / M, du / M
        if (rc != 0 || dc + 2 * M < du) bad = 1
      } else {
        printf "  %-14s %-22s context charged %.2f MiB, driver reports %.2f MiB for the process\n", via, "ctx:0", ctx / M, used / M
      }
      pc = charged; pu = used; op = "" }
    /^op=/ && !/^op=charged/ && !/^op=procmem/ && !/^op=(init|ctx)/ { split($1, a, "="); op = a[2]; split($2, r, "="); rc = r[2] }
    END { exit bad }' && pass "driver paths via $via (never charged less than the driver commits)" ||
    fail "driver paths via $via"
done
fi

if want fill; then
echo
echo "## Driver API: fill until refused under a 2 GiB limit"
container
line=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=2g "$bin/cuda-client" init ctx:0 fill:64m charged:0 procmem:0)
echo "$line"
echo "$line" | awk -v M=$MiB '/^op=charged/ { for (i=1;i<=NF;i++){split($i,kv,"="); c[kv[1]]=kv[2]} }
  /^op=procmem/ { for (i=1;i<=NF;i++){split($i,kv,"="); p[kv[1]]=kv[2]} }
  /^op=fill/ { for (i=1;i<=NF;i++){split($i,kv,"="); f[kv[1]]=kv[2]} }
  END { exit !(f["rc"] == 2 && c["total"] <= 2048 * M && p["used"] <= 2048 * M && c["total"] >= 2048 * M - 64 * M) }' &&
  pass "driver fill: refused at the limit, physical usage within it" || fail "driver fill"
fi

if want escape; then
echo
echo "## Paths outside every count before (docs/memory-paths.md), a tenant under a 2 GiB limit"
# Each line: what the path tried, the answer, and what the driver holds for
# the process (NVML) at the end; never past the limit, and refused cleanly.
held_ok() {  # $1: client output; the last procmem:0 within the limit
  echo "$1" | awk -v M=$MiB '/^op=procmem/ { for (i=1;i<=NF;i++){split($i,kv,"="); p[kv[1]]=kv[2]} }
    END { printf "  driver holds %.0f MiB\n", p["used"] / M; exit !(p["used"] <= 2048 * M) }'
}
rc_is() { echo "$1" | grep -q "^op=$2 rc=$3 "; }  # some line of op $2 answered $3
escape() {  # $1: name; $2: expected answers "op=rc ..."; the rest: client ops
  local name=$1 want=$2 ok=1
  shift 2
  container
  local out
  out=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=2g "$bin/cuda-client" init ctx:0 "$@" procmem:0)
  echo "$out" | grep -v '^op=\(init\|ctx\)' | sed 's/ ms=[0-9.]*//; s/^/  /'
  for w in $want; do rc_is "$out" "${w%=*}" "${w##*=}" || ok=0; done
  held_ok "$out" || ok=0
  [ $ok = 1 ] && pass "escape path: $name" || fail "escape path: $name"
}
escape "VMM released while mapped" "vmmmap:0:768m=2" vmmmap:0:768m free:0 vmmmap:0:768m
escape "stack limit" "setlimit:stack:32768=2" setlimit:stack:32768
escape "malloc heap limit" "setlimit:heap:6g=2" setlimit:heap:6g
escape "module globals (1 GiB each)" "modfile:$bin/globals.cubin=2" modfile:$bin/globals.cubin \
  modfile:$bin/globals.cubin
# A first use that does not fit stays loaded until the library is unloaded.
escape "library globals at first use" "libkernel:touch_big=2 alloc:64m=2" libfile:$bin/globals.cubin \
  libkernel:touch_big libfile:$bin/globals.cubin libkernel:touch_big alloc:64m libunload
escape "graph allocation node of 6 GiB" "glaunch=2 gupload=2" gnode:0:6g ginst glaunch gupload
escape "captured 3 GiB graph allocation" "glaunch=2" gbegin galloc:3g gend ginst glaunch
# A VMM handle passed to another process of the container (as NCCL's ranks
# do): the importer is charged at its mapping. Under 3 GiB: the creator holds
# its context and 1 GiB, the importer its context; 1 GiB more does not fit.
container
LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=3g "$bin/cuda-client" init ctx:0 vmmmap:0:1g export \
  "sendfd:$work/fd.sock" mark hold > "$work/creator.out" 2>&1 < <(sleep 30) &
creator=$!
out=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=3g "$bin/cuda-client" init ctx:0 \
  "recvfd:$work/fd.sock" importmap:1g procmem:0)
echo "$out" | sed 's/ ms=[0-9.]*//; s/^/  /'
kill $creator 2>/dev/null; wait $creator 2>/dev/null
rc_is "$out" "recvfd:$work/fd.sock" 0 && rc_is "$out" importmap:1g 2 &&
  pass "escape path: VMM handle imported by another process" ||
  fail "escape path: VMM handle imported by another process"
fi

if want capture; then
echo
echo "## A capture that allocates stays valid, and its graph's memory is charged when real"
container
out=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=4g "$bin/cuda-client" --via=procaddr init ctx:0 \
  async:64m gbegin galloc:512m meminfo gstatus gfree gend ginst charged:0 glaunch:3 charged:0 \
  graphmem:0 gexecdestroy gtrim:0 charged:0)
echo "$out" | sed 's/ ms=[0-9.]*//; s/^/  /'
echo "$out" | awk -v M=$MiB '
  /^op=gstatus/ { for (i=1;i<=NF;i++) if ($i == "status=1") ok_status = 1 }
  /^op=(gfree|gend|ginst|glaunch:3|gtrim:0)/ { if ($2 != "rc=0") bad = 1 }
  /^op=charged/ { for (i=1;i<=NF;i++){split($i,kv,"="); c[kv[1]]=kv[2]} n++; t[n] = c["total"] }
  /^op=graphmem/ { for (i=1;i<=NF;i++){split($i,kv,"="); g[kv[1]]=kv[2]} }
  END { exit !(ok_status && !bad && t[2] - t[1] == g["reserved"] && g["reserved"] >= 512 * M &&
               t[3] == t[1]) }' &&
  pass "capture with stream-ordered allocations; graph memory charged as the driver reserves it" ||
  fail "capture and graph memory"
fi

if want smi; then
echo
echo "## nvidia-smi inside the container shows the limit and the container's usage"
container
LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=4g "$bin/cuda-client" init ctx:0 alloc:1g mark hold > "$work/holder.out" 2>&1 < <(sleep 20) &
holder=$!
for _ in $(seq 100); do grep -q op=mark "$work/holder.out" && break; sleep 0.1; done
LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=4g nvidia-smi
smi=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=4g nvidia-smi -i 0 --query-gpu=memory.total,memory.used,memory.free --format=csv,noheader,nounits)
charged=$("$VGPU_BIN" inspect --json "$CUDA_DEVICE_MEMORY_SHARED_CACHE" | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["used_bytes"] >> 20)')
echo "nvidia-smi total,used,free (MiB): $smi; state file charges $charged MiB"
echo "$smi" | awk -F', *' -v c="$charged" '{ exit !($1 == 4096 && $2 == c && $3 == 4096 - c) }' &&
  pass "nvidia-smi agrees with the limit and the state file" || fail "nvidia-smi"
kill $holder 2>/dev/null; wait $holder 2>/dev/null
fi

if want two; then
echo
echo "## Two PyTorch processes share a 6 GiB limit"
container
r=$(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=6g python3 tests/gpu/two_processes.py)
rc=$?
echo "$r"
[ $rc -eq 0 ] && pass "two processes within 6 GiB together" || fail "two processes"
fi

echo
echo "# $fails check(s) failed"
rm -rf "$work"
exit $((fails > 0))
