#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time over
# its seed corpus. Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [extra libFuzzer args]
# Each target runs on one core, so FUZZ_JOBS targets (default: nproc) run at
# once; each still gets SECONDS_PER_TARGET of its own. A target's output is
# printed when it ends, whole; any target failing fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
jobs=${FUZZ_JOBS:-$(nproc)}

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
mkdir -p fuzz/artifacts
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

fuzz_one() {
  local target=$1 name corpus work rc=0
  shift
  name=$(basename "$target")
  corpus="fuzz/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  {
    echo "fuzz: $name for ${seconds}s (seeds: $corpus)"
    "$target" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix=fuzz/artifacts/ \
      "$@" "$work" "$corpus" || rc=$?
  } >"$logs/$name.log" 2>&1
  rm -rf "$work"
  cat "$logs/$name.log"
  [ $rc -eq 0 ] || echo "fuzz: $name FAILED (exit $rc)"
  return $rc
}

failed=0
running=0
for target in build/fuzz/fuzz/fuzz_*; do
  if [ $running -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$target" "$@" &
  running=$((running + 1))
done
while [ $running -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
[ $failed -eq 0 ] || { echo "fuzz: at least one target failed (above)" >&2; exit 1; }
