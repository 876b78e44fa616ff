#!/usr/bin/env bash
# The node agent against a real GPU (run on the H100/H200 machine):
#   tests/gpu/node_agent.sh [OUTDIR]
# Two "containers" (state files in the agent's layout) run PyTorch GEMM loops
# under libvgpu.so, one unlimited and one at a 30 % SM share; the agent's pass,
# with the real NVML, must map each process to its host PID and attribute
# device memory and SM utilisation to the right container. Output:
# OUTDIR/node-agent.txt; exits non-zero when a check fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/gpu-results}}
mkdir -p "$out"
exec > >(tee "$out/node-agent.txt") 2>&1

fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
echo "# node agent on a real GPU, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${GIT_COMMIT:-unknown}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

build=build/gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHAMI_BUILD_TESTS=OFF -DHAMI_WERROR=OFF \
  -DHAMI_LIBVGPU_ONLY=ON >/dev/null &&
  cmake --build "$build" -j "$(nproc)" --target vgpu_lib >/dev/null || { echo "FAIL build"; exit 1; }
lib=$PWD/$build/src/libvgpu.so
bin=$build/gpu-bin
mkdir -p "$bin"
tests/gpu/build_agent_once.sh "$bin/agent-once" ||
  { echo "FAIL agent build"; exit 1; }

hook=$(mktemp -d)
mkdir -p "$hook/containers/pod-free_main" "$hook/containers/pod-thirty_main"
gemm='
import sys, time, torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
end = time.time() + float(sys.argv[1]); n = 0
while time.time() < end:
    for _ in range(20): a @ b
    torch.cuda.synchronize(); n += 20
print(f"iterations={n}", flush=True)
'
CUDA_DEVICE_MEMORY_SHARED_CACHE=$hook/containers/pod-free_main/vgpu.cache CUDA_DEVICE_MEMORY_LIMIT=8g \
  LD_PRELOAD=$lib python3 -c "$gemm" 14 > "$hook/free.out" &
p_free=$!
CUDA_DEVICE_MEMORY_SHARED_CACHE=$hook/containers/pod-thirty_main/vgpu.cache CUDA_DEVICE_MEMORY_LIMIT=4g \
  CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=force \
  LD_PRELOAD=$lib python3 -c "$gemm" 14 > "$hook/thirty.out" &
p_thirty=$!
sleep 6  # start-up, first kernels, the limiter settled

echo "## nvidia-smi: compute apps"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
echo "## agent: 3 passes 1 s apart, real NVML"
"$bin/agent-once" "$hook" 3 1000 > "$hook/metrics.txt"
grep '^#' "$hook/metrics.txt"
grep -E '^hami_(container_device_utilization_ratio|container_device_nvml_memory_bytes|vgpu_memory_used_bytes|vgpu_memory_limit_bytes|host_gpu_utilization_ratio|monitor_unresolved)' "$hook/metrics.txt"
wait $p_free $p_thirty
echo "free: $(cat "$hook/free.out")  thirty: $(cat "$hook/thirty.out")"

val() { grep "^$1{" "$hook/metrics.txt" | grep "pod=\"$2\"" | grep 'vdevice_index="0"' | awk '{print $NF}' | head -1; }
for pod in pod-free pod-thirty; do
  u=$(val hami_container_device_utilization_ratio $pod)
  m=$(val hami_container_device_nvml_memory_bytes $pod)
  [ -n "$u" ] && [ "$u" -gt 0 ] && pass "$pod utilisation attributed ($u %)" || fail "$pod utilisation ($u)"
  [ -n "$m" ] && [ "$m" -gt 0 ] && pass "$pod NVML memory attributed ($m bytes)" || fail "$pod NVML memory ($m)"
done
uf=$(val hami_container_device_utilization_ratio pod-free)
ut=$(val hami_container_device_utilization_ratio pod-thirty)
[ -n "$uf" ] && [ -n "$ut" ] && [ "$ut" -lt "$uf" ] && pass "the 30 % container shows less SM use ($ut) than the free one ($uf)" ||
  fail "30 % container $ut vs free $uf"
grep -q '^hami_monitor_unresolved_processes{zone="vGPU"} 0$' "$hook/metrics.txt" &&
  pass "every process slot resolved to a host PID" || fail "unresolved process slots"
for p in $p_free $p_thirty; do
  grep -q "host_pid $p\b" "$hook/metrics.txt" && pass "host PID $p found" || fail "host PID $p not found"
done
echo "# $fails failed"
[ "$fails" -eq 0 ]
