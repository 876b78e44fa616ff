#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, checks the
# docs' links and paths, then builds and runs the unit and integration tests
# in Release and under ASan+UBSan, the deployment checks, the concurrent
# parts under TSan, the end-to-end scenarios on a real Kubernetes control
# plane, and a bounded fuzzing run.
#   scripts/test.sh            everything
#   FUZZ_SECONDS=0 scripts/test.sh   skip the bounded fuzzing run (default: 180 s
#                                    in all, shared across the targets)
#   E2E=0 scripts/test.sh            skip the end-to-end run (control plane and real node)
#   HAMI_E2E_NODE=0 scripts/test.sh  the end-to-end run without the real node
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
jobs=$(nproc)
start=$SECONDS

step() { printf '\n=== %s (%ds)\n' "$*" $((SECONDS - start)); }

# Cheap, so first: every link and repository path the docs name exists, no
# page cites files outside the repository or runs over 2,000 words.
step "docs check (links, paths, length)"
scripts/check-docs.sh --self-test
scripts/check-docs.sh

# Every cross-component #include in src/ declared in src/CMakeLists.txt (the
# build checks it too; this says so before anything compiles).
step "include check (cross-component includes declared in CMake)"
scripts/check-includes.sh --self-test
scripts/check-includes.sh

# Release builds everything (the benchmarks too, so they keep compiling);
# ASan+UBSan only what its tests run (tests/all: the test programs and the
# daemons and libraries they start).
for preset in release asan; do
  step "build $preset"
  cmake --preset "$preset" >/dev/null
  if [ "$preset" = asan ]; then
    cmake --build --preset "$preset" -j "$jobs" --target tests/all
  else
    cmake --build --preset "$preset" -j "$jobs"
  fi
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
  vgpu_limiter_thread_tests k8s_tests scheduler_tests scheduler_api_tests http_tests \
  mps_supervisor_tests
step "test tsan (concurrency, the Kubernetes client, the scheduler's cache, the HTTP server)"
TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}" \
  ctest --preset tsan -L "concurrency|k8s|scheduler|http"

# The whole path through a real kube-apiserver and kube-scheduler, then a real
# kubelet and containerd (1.20, built once from Debian's source package and
# cached outside the clone): E2E=0 skips. In build/release, which has every
# binary already: only the e2e test itself is compiled.
if [ "${E2E:-1}" != 0 ]; then
  step "end to end on a real Kubernetes 1.20 control plane and node (tests/e2e/run.sh)"
  e2e_start=$SECONDS
  HAMI_E2E_BUILD=build/release HAMI_E2E_JOBS=$jobs tests/e2e/run.sh
  echo "end to end: $((SECONDS - e2e_start)) s"
fi

step "clang-format check"
scripts/format.sh --check

# One budget shared by the targets (one fuzz/*.cpp each), at least 5 s each;
# each target runs on one core, so scripts/fuzz.sh runs $jobs at once and the
# step takes about fuzz_total / jobs.
fuzz_total=${FUZZ_SECONDS:-180}
if [ "$fuzz_total" -gt 0 ]; then
  fuzz_targets=$(find fuzz -maxdepth 1 -name '*.cpp' | wc -l)
  fuzz_each=$((fuzz_total / fuzz_targets))
  [ "$fuzz_each" -ge 5 ] || fuzz_each=5
  step "fuzz (${fuzz_total}s in all: ${fuzz_each}s for each of $fuzz_targets targets, $jobs at once)"
  FUZZ_JOBS=$jobs scripts/fuzz.sh "$fuzz_each"
fi
step "all tests passed"
