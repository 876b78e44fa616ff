#!/usr/bin/env bash
# The real driver's answers to the read-only MIG queries the device plugin
# makes (tests/gpu/mig_probe.cpp): MIG mode, maximum MIG device count, every
# GPU-instance profile with its placements and remaining capacity, and any
# MIG devices; then the same through the plugin's own NVML code
# (tests/gpu/mig_loader_probe.cpp). Changes nothing on the GPU (no MIG mode
# change, no instance).
#
#   tests/gpu/mig_probe.sh [OUTDIR]
#
# Writes OUTDIR/mig-probe.txt (default $OUT or /tmp/gpu-results); exit 1 when
# the probe met an answer the plugin would not handle.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-${OUT:-/tmp/gpu-results}}"
mkdir -p "$out"
exec > >(tee "$out/mig-probe.txt") 2>&1
echo "# MIG probe, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
nvidia-smi --query-gpu=index,name,driver_version,mig.mode.current,mig.mode.pending --format=csv 2>&1
bin=$(mktemp -d)
g++ -O2 -std=c++20 -Wall -Wextra -Isrc tests/gpu/mig_probe.cpp -ldl -o "$bin/mig-probe" ||
  { echo "FAIL probe build"; exit 1; }
"$bin/mig-probe"
rc=$?
# The same reads through the plugin's own code (src/nvml: the loader and the
# MIG manager's read-only calls).
g++ -O2 -std=c++20 -Wall -Wextra -Isrc tests/gpu/mig_loader_probe.cpp src/nvml/nvml.cpp \
  src/nvml/mig_control.cpp src/common/*.cpp -ldl -lpthread -o "$bin/mig-loader-probe" ||
  { echo "FAIL loader probe build"; exit 1; }
"$bin/mig-loader-probe" || rc=1
exit $rc
