#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time over
# its seed corpus. Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [extra libFuzzer args]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
mkdir -p fuzz/artifacts
for target in build/fuzz/fuzz/fuzz_*; do
  name=$(basename "$target")
  corpus="fuzz/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  echo "fuzz: $name for ${seconds}s (seeds: $corpus)"
  "$target" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix=fuzz/artifacts/ \
    "$@" "$work" "$corpus"
  rm -rf "$work"
done
