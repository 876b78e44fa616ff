#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, then builds and
# runs the unit and integration tests in Release and under ASan+UBSan, the
# concurrent parts under TSan, and a bounded fuzzing run.
#   scripts/test.sh            everything
#   FUZZ_SECONDS=0 scripts/test.sh   skip the bounded fuzzing run
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
jobs=$(nproc)
start=$SECONDS

step() { printf '\n=== %s (%ds)\n' "$*" $((SECONDS - start)); }

for preset in release asan; do
  step "build $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  step "test $preset"
  ctest --preset "$preset" -j "$jobs"
done

# The chart, Dockerfiles and dashboard against the code (flags from the
# Release binaries just built), then the same checks on broken copies.
step "deploy checks (chart, images, dashboard)"
deploy/check.sh --build-dir build/release
deploy/check.sh --self-test --build-dir build/release

step "build tsan"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target region_thread_tests region_tests \
  vgpu_limiter_thread_tests k8s_tests scheduler_tests scheduler_api_tests
step "test tsan (concurrency, the Kubernetes client, the scheduler's cache and server)"
TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}" \
  ctest --preset tsan -L "concurrency|k8s|scheduler"

step "clang-format check"
scripts/format.sh --check

fuzz_seconds=${FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" -gt 0 ]; then
  step "fuzz (${fuzz_seconds}s per target)"
  scripts/fuzz.sh "$fuzz_seconds"
fi
step "all tests passed"
