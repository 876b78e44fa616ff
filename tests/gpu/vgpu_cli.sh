#!/usr/bin/env bash
# `vgpu run` and `vgpu top` on a real GPU (run on the H100/H200 machine):
#   tests/gpu/vgpu_cli.sh [OUTDIR]
# Two PyTorch jobs started with `vgpu run` share GPU 0 (4 GiB + 30 % and
# 2 GiB + 60 %); the second tries to allocate past its limit. `vgpu top --once`
# shows them; a third request that cannot fit is refused with the reasons.
# Then two jobs as MPS clients (--sharing mps, 30 % and high priority): vgpu top
# shows their thread percentages.
# Output: OUTDIR/vgpu-cli.txt; exits non-zero when a check fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/gpu-results}}
mkdir -p "$out"
exec > >(tee "$out/vgpu-cli.txt") 2>&1

fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
echo "# vgpu run / vgpu top on a real GPU, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${GIT_COMMIT:-unknown}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader

build=build/gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHAMI_BUILD_TESTS=OFF -DHAMI_WERROR=OFF \
  -DHAMI_LIBVGPU_ONLY=ON >/dev/null &&
  cmake --build "$build" -j "$(nproc)" --target vgpu_lib vgpu >/dev/null || { echo "FAIL build"; exit 1; }
vgpu=$PWD/$build/src/vgpu
lib=$PWD/$build/src/libvgpu.so
hook=$(mktemp -d)
job='
import sys, time, torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
held = []
try:
    for _ in range(int(sys.argv[1])): held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    print(f"allocated {len(held) * 256} MiB", flush=True)
except torch.cuda.OutOfMemoryError:
    print(f"OutOfMemoryError after {len(held) * 256} MiB", flush=True)
n = 0; end = time.time() + 14
while time.time() < end:
    for _ in range(10): a @ b
    torch.cuda.synchronize(); n += 10
print(f"iterations={n}", flush=True)
'
echo
echo "\$ vgpu run --memory 4g --cores 30 --name train -- python3 job.py 8 &"
"$vgpu" run --hook-path "$hook" --library "$lib" --memory 4g --cores 30 --name train --gpu 0 \
  -- python3 -c "$job" 8 > "$hook/train.log" 2>&1 &
p1=$!
echo "\$ vgpu run --memory 2g --cores 60 --name serve -- python3 job.py 16 &"
"$vgpu" run --hook-path "$hook" --library "$lib" --memory 2g --cores 60 --name serve --gpu 0 \
  -- python3 -c "$job" 16 > "$hook/serve.log" 2>&1 &
p2=$!
sleep 8
echo
echo "\$ vgpu top --once"
"$vgpu" top --once --hook-path "$hook" | tee "$hook/top.txt"
echo
echo "\$ vgpu run --gpu 0 --memory 200g -- true"
"$vgpu" run --hook-path "$hook" --library "$lib" --gpu 0 --memory 200g -- true; rc=$?
echo "exit code $rc"
[ $rc -eq 1 ] && pass "a request that cannot fit is refused" || fail "200g request rc=$rc"
echo "\$ vgpu run --memory 1g --print-env"
"$vgpu" run --hook-path "$hook" --library "$lib" --memory 1g --print-env
wait $p1 $p2
echo
echo "train: $(tr '\n' ' ' < "$hook/train.log")"
echo "serve: $(tr '\n' ' ' < "$hook/serve.log")"
grep -q "allocated 2048 MiB" "$hook/train.log" && pass "train allocated 2 GiB under its 4 GiB limit" || fail "train allocation"
grep -q "OutOfMemoryError" "$hook/serve.log" && pass "serve refused past its 2 GiB limit" || fail "serve limit"
grep -q "train " "$hook/top.txt" && grep -q "serve " "$hook/top.txt" && pass "vgpu top shows both jobs" || fail "vgpu top rows"
grep -E "train|serve" "$hook/top.txt" | grep -q -- "->" && pass "vgpu top maps their PIDs" || fail "vgpu top PIDs"

# The same through MPS: a capped job and a high-priority (uncapped) one, as
# clients of the GPU's MPS server; vgpu top shows each one's thread percentage.
echo
echo "\$ vgpu run --sharing mps --memory 4g --cores 30 --name mpstrain -- python3 job.py 8 &"
"$vgpu" run --sharing mps --hook-path "$hook" --library "$lib" --memory 4g --cores 30 \
  --name mpstrain --gpu 0 -- python3 -c "$job" 8 > "$hook/mpstrain.log" 2>&1 &
p3=$!
echo "\$ vgpu run --sharing mps --memory 2g --cores 30 --priority high --name mpsserve -- python3 job.py 4 &"
"$vgpu" run --sharing mps --hook-path "$hook" --library "$lib" --memory 2g --cores 30 \
  --priority high --name mpsserve --gpu 0 -- python3 -c "$job" 4 > "$hook/mpsserve.log" 2>&1 &
p4=$!
sleep 10
echo
echo "\$ vgpu top --once"
"$vgpu" top --once --hook-path "$hook" | tee "$hook/top-mps.txt"
wait $p3 $p4
echo "\$ vgpu mps stop"
"$vgpu" mps stop --hook-path "$hook"
echo "mpstrain: $(tr '\n' ' ' < "$hook/mpstrain.log")"
echo "mpsserve: $(tr '\n' ' ' < "$hook/mpsserve.log")"
grep -q "iterations=" "$hook/mpstrain.log" && grep -q "iterations=" "$hook/mpsserve.log" &&
  pass "both MPS jobs ran" || fail "MPS jobs"
grep "mpstrain " "$hook/top-mps.txt" | grep -q "mps 30%" && pass "vgpu top shows the capped MPS job at mps 30%" ||
  fail "vgpu top MPS share of mpstrain"
grep "mpsserve " "$hook/top-mps.txt" | grep -q "mps -" && pass "vgpu top shows the uncapped MPS job as mps -" ||
  fail "vgpu top MPS share of mpsserve"
echo "# $fails failed"
[ "$fails" -eq 0 ]
