#!/usr/bin/env bash
# Does an MPS client need the server's /dev/shm? What the device plugin's
# layout relies on (docs/mps.md, "Shared memory"), tried on a real GPU with
# mount namespaces standing in for containers:
#   bench/mps/shm_check.sh [OUTDIR]
# The control daemon (and so the server it starts) runs with a directory X
# bound over /dev/shm, as in the plugin's container. Then three clients, each
# a CUDA context that runs one kernel and reports its SMs (bench/mps/client.cu,
# with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50; one before the daemon starts):
#   same     /dev/shm bound to X, as Allocate mounts it for an MPS pod
#   private  a fresh tmpfs on /dev/shm, as a container of its own would have
#   host     the machine's /dev/shm
# Needs `unshare -m` (root) or `unshare -rm` (user namespaces). Writes
# OUTDIR/shm-check.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-${OUT:-/tmp/mps-results}}
mkdir -p "$out"
work=$(mktemp -d)
shm=$work/shm pipe=$work/pipe log=$work/log
mkdir -p "$shm" "$pipe" "$log"
chmod 1777 "$shm"
ns=(unshare -m)
[ "$(id -u)" = 0 ] || ns=(unshare -rm)
nvcc -o "$work/client" bench/mps/client.cu -lcuda || exit 1
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
export CUDA_MPS_PIPE_DIRECTORY=$pipe CUDA_MPS_LOG_DIRECTORY=$log CUDA_VISIBLE_DEVICES=$uuid
stop() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; sleep 1; pkill -9 -f "nvidia-cuda-mps" 2>/dev/null; rm -rf "$work"; }
trap stop EXIT
{
  echo "# bench/mps/shm_check.sh: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); namespaces: ${ns[*]}"
  try() {  # NAME SETUP
    local t0=$SECONDS rc
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 60 "${ns[@]}" sh -c "$2 && '$work/client'" \
      >"$work/$1.out" 2>&1
    rc=$?
    echo "$1: exit $rc after $((SECONDS - t0)) s: $(tail -1 "$work/$1.out")"
  }
  try before-the-daemon "true"
  "${ns[@]}" sh -c "mount --bind '$shm' /dev/shm && nvidia-cuda-mps-control -d" &&
    echo "daemon started with $shm over /dev/shm" || echo "daemon: could not start (exit $?)"
  sleep 1
  try same "mount --bind '$shm' /dev/shm"
  try private "mount -t tmpfs none /dev/shm"
  try host "true"
  echo "server's files in X: $(ls "$shm" | head -5 | tr '\n' ' ')"
  echo "control log tail:"; tail -5 "$log/control.log" 2>/dev/null
  echo "server log tail:"; tail -5 "$log/server.log" 2>/dev/null
} 2>&1 | tee "$out/shm-check.txt"
