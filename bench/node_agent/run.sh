#!/usr/bin/env bash
# Node-agent benchmark: scrape latency and pass cost with 1,024 containers on
# 8 GPUs, then the daemon's CPU use on that idle node (simulated NVML).
#   bench/node_agent/run.sh [OUT_FILE]     (default: print only)
# Builds the release preset first. Results: bench/results/node-agent-*.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/dev/null}
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target scrape-bench hami-node-agent simnvml >/dev/null
{
  echo "# node-agent benchmark, commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ)"
  echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  nvml=build/release/tests/support/simgpu/lib/libnvidia-ml.so.1
  build/release/bench/node_agent/scrape-bench --containers "${CONTAINERS:-1024}" --gpus 8 \
    --scrapes 200 --passes 20 \
    --agent build/release/src/hami-node-agent --idle-seconds "${IDLE_SECONDS:-30}" --nvml "$nvml"
  echo "## an empty node (no containers)"
  build/release/bench/node_agent/scrape-bench --containers 0 --gpus 8 --scrapes 50 --passes 5 \
    --agent build/release/src/hami-node-agent --idle-seconds "${IDLE_SECONDS:-30}" --nvml "$nvml"
} | tee "$out"
