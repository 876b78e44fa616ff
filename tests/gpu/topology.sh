#!/usr/bin/env bash
# What this machine's NVML says about each pair of its GPUs, read by the device
# plugin's own code, beside nvidia-smi's view of the same (run on a GPU machine
# with the driver, g++ and the CUDA toolkit; no CMake build needed):
#   tests/gpu/topology.sh [OUTDIR]
# Writes OUTDIR/topology.txt (default $OUT or /tmp/gpu-results). Checks that
# our NVML declarations match this toolkit's nvml.h (PASS/FAIL nvml_abi_check)
# and prints the probe's GPUs, NVLinks, pairs and the annotations the plugin
# would register. Exits non-zero if the build, the ABI check or the probe fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/gpu-results}}
mkdir -p "$out"
exec > >(tee "$out/topology.txt") 2>&1

fails=0
echo "# GPU topology probe, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader
for view in "topo -m" "topo -p2p r" "nvlink -s"; do
  echo
  echo "## nvidia-smi $view"
  # shellcheck disable=SC2086
  nvidia-smi $view
done

bin=build/gpu-bin
mkdir -p "$bin"
echo
nvml_h=/usr/local/cuda/include/nvml.h
if [ -f "$nvml_h" ]; then
  if g++ -std=c++20 -fsyntax-only -Isrc -isystem /usr/local/cuda/include tests/nvml/nvml_abi_check.cpp; then
    echo "PASS nvml_abi_check against $nvml_h"
  else
    echo "FAIL nvml_abi_check against $nvml_h"
    fails=$((fails + 1))
  fi
else
  echo "SKIP nvml_abi_check: no $nvml_h"
fi
g++ -O2 -std=c++20 -Isrc tests/gpu/topology_probe.cpp src/nvml/nvml.cpp src/nvml/topology.cpp \
  src/protocol/node_register.cpp -ldl -o "$bin/topology-probe" || { echo "FAIL probe build"; exit 1; }
echo
echo "## topology-probe (src/nvml/topology.cpp)"
if "$bin/topology-probe"; then echo "PASS probe"; else echo "FAIL probe"; fails=$((fails + 1)); fi
exit $fails
