#!/usr/bin/env bash
# The end-to-end suite on a real Kubernetes control plane, as CI runs it:
#   1. tests/e2e/build-k8s.sh: Debian packages; kube-apiserver, kube-scheduler
#      and kubectl 1.20 built once and cached (~/.cache/hami-e2e)
#   2. our daemons and the test, in build/e2e (Release, -DHAMI_E2E=ON)
#   3. tests/e2e/control-plane.sh start; the test; control-plane.sh stop, also
#      when a step fails or the run is interrupted
#   4. the scenarios on a real node (tests/e2e/node_scenarios.sh: kubelet,
#      containerd, our daemons, in a network namespace with no way out), with
#      the state directory $HAMI_E2E_DIR-node; needs root
#   5. our Helm chart installed on a real node (tests/e2e/chart.sh: images
#      built with buildah, `helm install`, a GPU pod), in $HAMI_E2E_DIR-chart
# Prints the time each phase took.
#
#   tests/e2e/run.sh [gtest flags, e.g. --gtest_filter=*Spread*]
#
# HAMI_E2E_JOBS   parallel build jobs (default 2)
# HAMI_E2E_BUILD  build directory (default build/e2e; scripts/test.sh passes
#                 build/release, which then also builds the e2e test)
# HAMI_E2E_NODE   0: no real node (steps 4 and 5), e.g. beside another run on
#                 this machine: only one real node runs per machine
# HAMI_E2E_CHART  0: not step 5
# The rest: control-plane.sh --help
set -euo pipefail
cd "$(dirname "$0")/../.."

JOBS=${HAMI_E2E_JOBS:-2}
BUILD=${HAMI_E2E_BUILD:-build/e2e}
export HAMI_E2E_DIR=${HAMI_E2E_DIR:-/tmp/hami-e2e}
start=$SECONDS
phase_start=$SECONDS
phase() {
  printf '=== e2e: %s done in %ds\n' "$1" $((SECONDS - phase_start))
  phase_start=$SECONDS
}

NODE=${HAMI_E2E_NODE:-1}
if [ "$NODE" != 0 ]; then
  # Fail here, before any build, rather than skip the node in CI.
  tests/e2e/node_scenarios.sh --check-prerequisites
  tests/e2e/build-k8s.sh --with-kubelet --with-controller-manager
else
  tests/e2e/build-k8s.sh
fi
phase "Kubernetes binaries (build or cache)"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHAMI_E2E=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target e2e_control_plane_tests hami-scheduler hami-device-plugin
if [ "$NODE" != 0 ]; then
  # The node's CUDA client, simulated driver, libvgpu.so and node agent: in
  # CI build/release has them already.
  [ -f build/release/build.ninja ] || cmake --preset release >/dev/null
  cmake --build build/release -j "$JOBS" --target cuda-client vgpu_lib simcuda simnvml hami-node-agent \
    hami-scheduler hami-device-plugin vgpu
fi
phase "our binaries"

cleanup() {
  local rc=$?
  tests/e2e/control-plane.sh stop || true
  if [ $rc -ne 0 ]; then
    echo "e2e: failed; logs of every process are in $HAMI_E2E_DIR/logs" >&2
  fi
  printf '=== e2e: total %ds\n' $((SECONDS - start))
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tests/e2e/control-plane.sh start >/dev/null
phase "control plane start"

# shellcheck disable=SC1091
source "$HAMI_E2E_DIR/env"
"$BUILD/tests/e2e_control_plane_tests" "$@"
phase "scenarios"

if [ "$NODE" != 0 ]; then
  tests/e2e/control-plane.sh stop
  HAMI_E2E_DIR=$HAMI_E2E_DIR-node HAMI_E2E_BUILD=$BUILD tests/e2e/node_scenarios.sh
  phase "real node scenarios"
  if [ "${HAMI_E2E_CHART:-1}" != 0 ]; then
    HAMI_E2E_DIR=$HAMI_E2E_DIR-chart HAMI_E2E_BUILD=build/release tests/e2e/chart.sh
    phase "the chart on the real node"
  fi
fi
