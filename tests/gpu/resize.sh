#!/usr/bin/env bash
# Live resize on a real GPU (run on the H100/H200 machine):
#   tests/gpu/resize.sh [OUTDIR]          RESIZE_ONLY=memory|sm runs one part
# `vgpu run` jobs resized with `vgpu resize` while they run (the limits file
# replaced under the processes, as a pod's resize does): a PyTorch job at
# 4 GiB resized to 8 GiB holds 7 GiB; a GEMM at 30 % resized to 60 % moves
# NVML GPU-Util from 30 +- 3 to 60 +- 3 within 2 s (tests/gpu/resize_live.py).
# Output: OUTDIR/resize.txt; exits non-zero when a check fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/gpu-results}}
mkdir -p "$out"
exec > >(tee "$out/resize.txt") 2>&1

echo "# live resize on a real GPU, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${GIT_COMMIT:-unknown}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
echo "# PyTorch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')"

build=build/gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHAMI_BUILD_TESTS=OFF -DHAMI_WERROR=OFF \
  -DHAMI_LIBVGPU_ONLY=ON >/dev/null &&
  cmake --build "$build" -j "$(nproc)" --target vgpu_lib vgpu >/dev/null || { echo "FAIL build"; exit 1; }
VGPU_BIN=$PWD/$build/src/vgpu VGPU_LIB=$PWD/$build/src/libvgpu.so python3 tests/gpu/resize_live.py
