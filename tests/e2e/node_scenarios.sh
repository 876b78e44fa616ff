#!/usr/bin/env bash
# Scenarios on the real node (docs/e2e-node.md), by hand until they join
# .ci/run: everything runs in the private network namespace, and everything
# started is stopped on exit, failures and Ctrl-C included.
#
#   tests/e2e/node_scenarios.sh
#
# Needs root, kubelet (tests/e2e/build-k8s.sh --with-kubelet), our binaries
# in build/e2e (cmake -DHAMI_E2E=ON, targets hami-scheduler
# hami-device-plugin) and the test client in build/release (cuda-client and
# the simulated driver). Prints one line per check; exit 1 if any failed.
#
# 1. a pod with gpumem 3000 sees a 3000 MiB GPU and is refused past it, as
#    its own exit code (checked through the pod's phase) says;
# 2. two pods of 6000 MiB share the one 16 GiB GPU;
# 3. a pod of 20000 MiB stays Pending, with our reason in its event.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=$PWD
export HAMI_E2E_DIR=${HAMI_E2E_DIR:-/tmp/hami-e2e-node}
D=$HAMI_E2E_DIR
N=$D/node
NS=("$R/tests/e2e/netns.sh" run)
BIN=${HAMI_E2E_CACHE:-$HOME/.cache/hami-e2e}/bin
GPU=GPU-aaaa0000-0000-0000-0000-000000000001
failures=0

log() { printf 'node-scenarios: %s\n' "$*" >&2; }
check() {
  if [ "$1" = ok ]; then echo "ok    $2"; else
    echo "FAIL  $2"
    failures=$((failures + 1))
  fi
}
K() { "${NS[@]}" "$BIN/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@" 2> >(grep -v '^netns:' >&2); }

for f in build/e2e/src/hami-scheduler build/e2e/src/hami-device-plugin build/release/tests/vgpu/cuda-client \
  build/release/src/libvgpu.so build/release/tests/support/simgpu/lib/libnvidia-ml.so "$BIN/kubelet"; do
  [ -e "$f" ] || {
    log "missing $f (see the header)"
    exit 2
  }
done

teardown() {
  "${NS[@]}" tests/e2e/node.sh stop >/dev/null 2>&1
  "${NS[@]}" tests/e2e/control-plane.sh stop >/dev/null 2>&1
  tests/e2e/netns.sh delete
}
trap teardown EXIT

"${NS[@]}" tests/e2e/control-plane.sh start >"$D.start.log" 2>&1 || {
  log "control plane did not start: $(tail -3 "$D.start.log")"
  exit 1
}
"${NS[@]}" tests/e2e/node.sh start >>"$D.start.log" 2>&1 || {
  log "node did not start: $(tail -3 "$D.start.log")"
  exit 1
}
# shellcheck disable=SC1090
source <(tests/e2e/node.sh env)
# shellcheck disable=SC1091
source "$D/env"

"${NS[@]}" setsid build/e2e/src/hami-scheduler --kubeconfig="$HAMI_E2E_SCHEDULER_KUBECONFIG" \
  --http_bind="127.0.0.1:$HAMI_E2E_EXTENDER_PORT" --cert_file="$HAMI_E2E_CERT" \
  --key_file="$HAMI_E2E_KEY" --client-ca-file="$HAMI_E2E_CLIENT_CA" \
  --metrics-bind-address="127.0.0.1:$HAMI_E2E_METRICS_PORT" >"$N/logs/hami-scheduler.log" 2>&1 &
echo $! >"$N/pids/hami-scheduler.pid"
mkdir -p "$N/hook/vgpu" "$N/dp"
cp build/release/src/libvgpu.so "$N/hook/vgpu/"
(cd "$N/dp" && SIMGPU_STATE="$N/dp/gpu.state" SIMGPU_DEVICES="$GPU:16384m" SIMGPU_NAMES="NVIDIA H100" \
  "${NS[@]}" setsid "$R/build/e2e/src/hami-device-plugin" --node-name="$HAMI_E2E_NODE_NAME" \
  --kubeconfig="$HAMI_E2E_DEVICE_PLUGIN_KUBECONFIG" --device-plugin-path="$HAMI_E2E_DEVICE_PLUGIN_DIR" \
  --hook-path="$N/hook" --lock-dir="$N/dp/vgpulock" \
  --nvml-library="$R/build/release/tests/support/simgpu/lib/libnvidia-ml.so" \
  >"$N/logs/hami-device-plugin.log" 2>&1 &
  echo $! >"$N/pids/hami-device-plugin.pid")
"${NS[@]}" tests/e2e/node.sh client-image "$R/build/release" >>"$D.start.log" 2>&1

wait_until() {
  local secs=$1
  shift
  for _ in $(seq 1 $((secs * 2))); do
    "$@" && return 0
    sleep 0.5
  done
  return 1
}
gpus_listed() { [ "$(K get node "$HAMI_E2E_NODE_NAME" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 10 ]; }
wait_until 30 gpus_listed
check "$(gpus_listed && echo ok)" "the device plugin registered with the real kubelet: nvidia.com/gpu 10"

pod() {  # pod NAME MIB COMMAND...
  local name=$1 mib=$2
  shift 2
  local cmd
  cmd=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")
  K create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default}
spec:
  restartPolicy: Never
  dnsPolicy: Default
  containers:
  - name: main
    image: hami-e2e/cuda-client:1
    imagePullPolicy: Never
    command: $cmd
    env:
    - {name: SIMGPU_DEVICES, value: "$GPU:16384m"}
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: $mib, nvidia.com/gpucores: 30}
EOF
}
phase() { K get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
ended() { case "$(phase "$1")" in Succeeded | Failed) return 0 ;; esac; return 1; }

# 1. Refused past the limit: the client's own output decides its exit code.
pod fill 3000 /bin/sh -c 'out=$(cuda-client init ctx:0 meminfo fill:100m); echo "$out"
  echo "$out" | grep -q "total=3145728000" &&
  echo "$out" | grep -q "op=fill:100m rc=2 .*allocated=2831155200"'
wait_until 60 ended fill
check "$([ "$(phase fill)" = Succeeded ] && echo ok)" \
  "gpumem 3000: a 3000 MiB GPU, refused (out of memory) after 2,700 MiB, in a real container (phase $(phase fill))"

# 2. Two pods on the one GPU.
pod share-a 6000 /bin/sh -c 'cuda-client init ctx:0 alloc:4000m'
pod share-b 6000 /bin/sh -c 'cuda-client init ctx:0 alloc:4000m'
wait_until 60 ended share-a
wait_until 60 ended share-b
on_gpu() { K get pod "$1" -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}' | grep -c "$GPU"; }
check "$([ "$(phase share-a)/$(phase share-b)" = Succeeded/Succeeded ] && [ "$(on_gpu share-a)" = 1 ] &&
  [ "$(on_gpu share-b)" = 1 ] && echo ok)" "two pods of 6000 MiB ran on the one GPU ($(phase share-a), $(phase share-b))"

# 3. A pod that fits nowhere stays Pending with our reason.
pod too-big 20000 /bin/true
reason() { K get events --field-selector involvedObject.name=too-big -o jsonpath='{.items[*].message}'; }
wait_until 30 eval '[ -n "$(reason)" ]'
check "$([ "$(phase too-big)" = Pending ] && reason | grep -q CardInsufficientMemory && echo ok)" \
  "a pod of 20000 MiB stays Pending: $(reason | head -c 160)"

if [ $failures -gt 0 ]; then
  log "$failures check(s) failed; logs in $N/logs and $D/logs"
  exit 1
fi
log "all checks passed"
