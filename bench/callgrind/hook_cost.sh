#!/usr/bin/env bash
# Instructions libvgpu.so adds per call, counted by callgrind against the
# simulated driver: deterministic, comparable from commit to commit.
#   bench/callgrind/hook_cost.sh [BUILD_DIR]   (default build/release)
# For each call and condition: (Ir with N calls - Ir with 0 calls) / N, minus
# the same for the bare process, is what the hook costs.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
client=$build/tests/vgpu/cuda-client
lib=$PWD/$build/src/libvgpu.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH=$PWD/$build/tests/support/simgpu/lib SIMGPU_CONTEXT_SIZE=0
N=20000

ir() {  # condition ops...
  local cond=$1; shift
  local env=(SIMGPU_STATE=$work/gpu-$RANDOM)
  case $cond in
    nolimit) env+=(LD_PRELOAD=$lib) ;;
    limit) env+=(LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=64g
                 CUDA_DEVICE_MEMORY_SHARED_CACHE=$work/c-$RANDOM.cache) ;;
    # The same limit from a limits file (VGPU_LIMITS_FILE), as deployed: a
    # resize can replace it, so the library looks at it off the hot paths.
    limit-file)
      local limits=$work/limits-$RANDOM
      printf 'CUDA_DEVICE_MEMORY_LIMIT_0=64g\n' >"$limits"
      env+=(LD_PRELOAD=$lib VGPU_LIMITS_FILE=$limits
            CUDA_DEVICE_MEMORY_SHARED_CACHE=$work/c-$RANDOM.cache) ;;
    # An SM share that paces: every launch is charged, some are sampled.
    sm30) env+=(LD_PRELOAD=$lib CUDA_DEVICE_SM_LIMIT=30 SIMGPU_KERNEL_NS=1000
                CUDA_DEVICE_MEMORY_SHARED_CACHE=$work/c-$RANDOM.cache) ;;
    # The same share under the default policy with no other container busy
    # (the state file's utilization_switch, at byte 2008900, cleared first as
    # the node agent would): charged and published, not paced.
    sm30-idle)
      local cache=$work/c-$RANDOM.cache
      env "${env[@]}" LD_PRELOAD="$lib" CUDA_DEVICE_SM_LIMIT=30 \
        CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" "$client" init ctx:0 >/dev/null
      printf '\0\0\0\0' | dd of="$cache" bs=1 seek=2008900 conv=notrunc status=none
      env+=(LD_PRELOAD=$lib CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=default
            SIMGPU_KERNEL_NS=1000 CUDA_DEVICE_MEMORY_SHARED_CACHE=$cache) ;;
  esac
  env "${env[@]}" valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$client" "$@" \
    >/dev/null 2>"$work/vg.err"
  sed -n 's/^==[0-9]*== Collected : \([0-9]*\)/\1/p' "$work/vg.err"
}

printf '%-22s %-14s %14s %14s\n' call condition "Ir per call" "hook Ir/call"
for call in "cuMemGetInfo:infoloop:$N" "cuMemAlloc+cuMemFree:churn:2m:$N" \
            "cuLaunchKernel:launchpath:kernel:$N"; do
  name=${call%%:*}
  ops=${call#*:}
  conds="bare nolimit limit limit-file"
  [ "$name" = cuLaunchKernel ] && conds="$conds sm30 sm30-idle"
  declare -A per
  for cond in $conds; do
    base=$(ir $cond init ctx:0)
    full=$(ir $cond init ctx:0 "$ops")
    per[$cond]=$(( (full - base) / N ))
  done
  for cond in $conds; do
    printf '%-22s %-14s %14d %14d\n' "$name" "$cond" "${per[$cond]}" $(( per[$cond] - per[bare] ))
  done
  unset per
done
