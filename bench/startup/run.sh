#!/usr/bin/env bash
# Start-up benchmark: 256 containers' first processes started at once, each
# making its first CUDA calls on the simulated driver, without libvgpu.so,
# with it and a state file each, and with it and one state file for all.
# Writes bench/results/startup-build-machine.txt.
#
#   bench/startup/run.sh                  5 rounds of 256 containers
#   CONTAINERS=64 ROUNDS=2 OUT= bench/startup/run.sh   a quick look, not recorded
#
# STATE_DIR   where the state files are made (default /var/tmp/hami-startup-bench:
#             a disk, as a node's /usr/local/vgpu; not a tmpfs)
# BASELINE    another libvgpu.so (e.g. built from an earlier commit with
#             -DHAMI_LIBVGPU_ONLY=ON) run in the same rounds as own-base and
#             shared-base
set -euo pipefail
cd "$(dirname "$0")/../.."
CONTAINERS=${CONTAINERS:-256}
ROUNDS=${ROUNDS:-5}
STATE_DIR=${STATE_DIR:-/var/tmp/hami-startup-bench}
if [ -z "${OUT+x}" ]; then
  OUT=""
  [ "$CONTAINERS" = 256 ] && [ "$ROUNDS" = 5 ] && OUT=bench/results/startup-build-machine.txt
fi
BUILD=build/release
[ -d "$BUILD" ] || cmake --preset release >/dev/null
cmake --build "$BUILD" -j "${JOBS:-2}" --target vgpu_lib startup-bench startup-client simcuda simnvml
lib=$(find "$BUILD/src" -name 'libvgpu.so' -print -quit)
simdir=$(dirname "$(find "$BUILD/tests" -name 'libcuda.so.1' -print -quit)")
run() {
  echo "# Start-up of $CONTAINERS containers' first processes at once, with and without libvgpu.so"
  echo
  echo "Machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); state files on $(df -T "$(dirname "$STATE_DIR")" | awk 'NR==2 {print $2}')"
  echo "Commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench ':!bench/results' || echo ' (with uncommitted changes)'), $(date -u +%F)"
  echo "Command: bench/startup/run.sh (CONTAINERS=$CONTAINERS ROUNDS=$ROUNDS${BASELINE:+ BASELINE=$BASELINE}); the simulated driver (tests/support/simgpu)"
  echo "Load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  "$BUILD/bench/startup/startup-bench" --client "$BUILD/bench/startup/startup-client" \
    --libvgpu "$lib" --simgpu-dir "$simdir" --dir "$STATE_DIR" \
    --containers "$CONTAINERS" --rounds "$ROUNDS" ${BASELINE:+--baseline-libvgpu "$BASELINE"}
  echo
  echo "Load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}
if [ -n "$OUT" ]; then
  run | tee "$OUT"
else
  run
fi
