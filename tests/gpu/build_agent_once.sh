#!/usr/bin/env bash
# Builds tests/gpu/agent_once.cpp (one pass of the node agent over a hook
# path, printing its metrics) from the node agent's sources, for the GPU
# scripts that read the agent beside a running program:
#   tests/gpu/build_agent_once.sh OUT_BINARY
# Run from the repository root. Exits non-zero when the build fails.
set -euo pipefail
out=${1:?usage: tests/gpu/build_agent_once.sh OUT_BINARY}
g++ -O2 -std=c++20 -Isrc tests/gpu/agent_once.cpp src/monitor/agent.cpp \
  src/monitor/container_files.cpp src/monitor/feedback.cpp src/monitor/gpu_time.cpp \
  src/monitor/host_pid.cpp src/monitor/trusted_record.cpp src/monitor/metrics.cpp \
  src/monitor/state_writer.cpp src/monitor/nvml_sampler.cpp src/nvml/nvml.cpp \
  src/protocol/container_contract.cpp src/region/*.cpp src/common/*.cpp \
  -o "$out" -ldl -lpthread
