#!/usr/bin/env bash
# Our Helm chart installed for real on the end-to-end suite's real node
# (docs/e2e-node.md, "The chart on the real node"): the images built from
# deploy/docker/*.Dockerfile (deploy/docker/build-images.sh) and imported
# into the node's containerd, `helm install` by the pinned Helm, the
# scheduler Deployment and device-plugin DaemonSet running as pods, and one
# GPU pod through the webhook, the extender, Allocate, its limits and the
# node agent's metrics. Twice: with the chart's values, then with upstream
# HAMi v2.10's values.yaml (skipped when absent). Both add only
# tests/e2e/chart-sim-values.yaml: the simulated NVML from the node's hook
# directory.
#
#   tests/e2e/chart.sh
#
# HAMI_E2E_BUILD     build tree with the daemons, libvgpu.so, the simulated
#                    driver and cuda-client (default build/release)
# HAMI_E2E_DIR       state directory (default /tmp/hami-e2e-chart)
# HAMI_UPSTREAM_CHART  upstream's chart directory (default
#                    ../shared/reference/upstream-hami-chart-2.10, else
#                    /work/shared/..., as tests/compat finds it)
# Needs root, and the real node's prerequisites (tests/e2e/node_scenarios.sh
# --check-prerequisites); builds kube-controller-manager once
# (tests/e2e/build-k8s.sh). Prints one line per check; exit 1 if any failed.
# No -e: a failed check is counted and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
R=$PWD
export HAMI_E2E_DIR=${HAMI_E2E_DIR:-/tmp/hami-e2e-chart}
export HAMI_E2E_NETNS=${HAMI_E2E_NETNS:-hami-e2e-chart}
export HAMI_E2E_CHART=1
D=$HAMI_E2E_DIR
N=$D/node
B=${HAMI_E2E_BUILD:-build/release}
UPSTREAM=${HAMI_UPSTREAM_CHART:-$R/../shared/reference/upstream-hami-chart-2.10}
[ -f "$UPSTREAM/values.yaml" ] || [ -n "${HAMI_UPSTREAM_CHART:-}" ] ||
  UPSTREAM=/work/shared/reference/upstream-hami-chart-2.10
NS=("$R/tests/e2e/netns.sh" run)
BIN=${HAMI_E2E_CACHE:-$HOME/.cache/hami-e2e}/bin
GPU="GPU-aaaa0000-0000-0000-0000-000000000001"
failures=0
start=$SECONDS

log() { printf 'chart: %s\n' "$*" >&2; }
check() {
  if [ "$1" = ok ]; then printf 'ok    %4ds  %s\n' $((SECONDS - start)) "$2"; else
    printf 'FAIL  %4ds  %s\n' $((SECONDS - start)) "$2"
    failures=$((failures + 1))
  fi
}
K() { "${NS[@]}" "$BIN/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@" 2> >(grep -v '^netns:' >&2); }
wait_until() {
  local secs=$1
  shift
  for _ in $(seq 1 $((secs * 2))); do
    "$@" && return 0
    sleep 0.5
  done
  return 1
}

tests/e2e/node_scenarios.sh --check-prerequisites || exit 2
for f in "$B/src/hami-scheduler" "$B/src/hami-device-plugin" "$B/src/hami-node-agent" "$B/src/vgpu" "$B/src/libvgpu.so" \
  "$B/tests/vgpu/cuda-client" "$B/tests/support/simgpu/lib/libnvidia-ml.so.1"; do
  [ -e "$f" ] || {
    log "missing $f: build the release preset"
    exit 2
  }
done
tests/e2e/build-k8s.sh --with-kubelet --with-controller-manager || exit 2
HELM=$(scripts/setup-helm.sh) || exit 2
# The images are built while the cluster starts (they meet at the import).
IMAGES=$D-images
rm -rf "$IMAGES"
deploy/docker/build-images.sh --build-dir "$B" --out "$IMAGES" --kube-scheduler "$BIN/kube-scheduler" \
  >"$IMAGES.log" 2>&1 &
images_pid=$!

teardown() {
  local rc=$? t0=$SECONDS
  kill "$images_pid" 2>/dev/null && wait "$images_pid"
  if ! "${NS[@]}" tests/e2e/node.sh stop >"$D.stop.log" 2>&1; then
    log "node.sh stop failed, the machine is not clean ($D.stop.log): $(tail -3 "$D.stop.log")"
    rc=1
  fi
  log "node stopped in $((SECONDS - t0)) s"
  "${NS[@]}" tests/e2e/control-plane.sh stop >/dev/null 2>&1
  tests/e2e/netns.sh delete
  rm -rf "$IMAGES"
  log "stopped in $((SECONDS - t0)) s; total $((SECONDS - start)) s"
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM

"${NS[@]}" tests/e2e/control-plane.sh start >"$D.start.log" 2>&1 || {
  log "control plane did not start: $(tail -3 "$D.start.log")"
  exit 1
}
"${NS[@]}" tests/e2e/node.sh start >>"$D.start.log" 2>&1 || {
  log "node did not start: $(tail -3 "$D.start.log")"
  exit 1
}
log "control plane and node up ($((SECONDS - start)) s)"
wait "$images_pid" || {
  log "the images were not built: $(tail -3 "$IMAGES.log")"
  exit 1
}
log "$(tail -1 "$IMAGES.log")"
# shellcheck disable=SC1090
source <(tests/e2e/node.sh env)
NODE=$HAMI_E2E_NODE_NAME
CTR() { ctr --address "$N/containerd.sock" --namespace k8s.io "$@"; }
while read -r archive name more; do
  CTR images import "$archive" >/dev/null || exit 1
  for m in $more; do CTR images tag --force "docker.io/library/$name" "$m" >/dev/null 2>&1 ||
    CTR images tag --force "$name" "$m" >/dev/null; done
done <"$IMAGES/images.txt"
"${NS[@]}" tests/e2e/node.sh client-image "$R/$B" >>"$D.start.log" 2>&1 || exit 1
K label node "$NODE" gpu=on --overwrite >/dev/null
log "images imported, node labelled ($((SECONDS - start)) s)"

# The simulated driver where the plugin and agent see it: the node's hook
# directory, which the chart mounts into both (global.gpuHookPath).
HOOK=$N/hook
SIM=$HOOK/vgpu/sim
mkdir -p "$SIM"
cp -L "$B"/tests/support/simgpu/lib/{libnvidia-ml.so.1,libsimgpu_core.so} "$SIM/"
sed -e "s|@HOOK@|$HOOK|g" -e "s|@SIM@|$SIM|g" -e "s|@GPU@|$GPU|g" -e "s|@LOCK@|$N/vgpulock|g" \
  tests/e2e/chart-sim-values.yaml >"$D/sim-values.yaml"

metric() { # metric NAME POD: the node agent's value for the pod's container main
  local ip
  ip=$(K -n kube-system get pod -l app.kubernetes.io/component=device-plugin -o jsonpath='{.items[0].status.podIP}')
  "${NS[@]}" curl -sf "http://$ip:9394/metrics" 2>/dev/null |
    awk -v m="$1" -v p="pod=\"$2\"" 'index($0, m "{") == 1 && index($0, p) && /container="main"/ {print $NF; exit}'
}
phase() { K get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
ready() { # ready COMPONENT: at least one pod, every one Ready
  local s
  s=$(K -n kube-system get pod -l "app.kubernetes.io/component=$1" \
    -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{" "}{end}')
  [ -n "$s" ] && ! grep -qvE '=True$' < <(tr ' ' '\n' <<<"$s" | grep .)
}

# The GPU pod the whole way: extender, Allocate, its limits, the agent.
gpu_pod_checks() {
  local label=$1
  running() { [ "$(phase gpu-pod)" = Running ]; }
  wait_until 60 running
  local alloc
  alloc=$(K get pod gpu-pod -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}')
  check "$(running && grep -q "$GPU,NVIDIA,3000,30" <<<"$alloc" && echo ok)" \
    "[$label] extender and Allocate: Running on $(K get pod gpu-pod -o jsonpath='{.spec.nodeName}'), allocated '$alloc'"
  # Each check and its message read the same answer (kubectl logs and the
  # scrape can fail now and then on a loaded machine).
  local logs="" used=""
  limited() {
    logs=$(K logs gpu-pod 2>/dev/null)
    grep -q "total=3145728000" <<<"$logs"
  }
  wait_until 30 limited
  check "$(grep -q "total=3145728000" <<<"$logs" && echo ok)" \
    "[$label] in the container: a 3000 MiB GPU ($(grep -o 'total=[0-9]*' <<<"$logs" | head -1))"
  charged() {
    used=$(metric hami_vgpu_memory_used_bytes gpu-pod)
    [ "${used:-0}" -ge $((1000 << 20)) ] 2>/dev/null
  }
  wait_until 30 charged
  check "$([ "${used:-0}" -ge $((1000 << 20)) ] 2>/dev/null && echo ok)" \
    "[$label] node agent pod: hami_vgpu_memory_used_bytes ${used:-none}, limit $(metric hami_vgpu_memory_limit_bytes gpu-pod)"
}

# install LABEL HELM-ARGS...: install, the pods of our images, one GPU pod
# the whole way, uninstall.
install() {
  local label=$1 t0=$SECONDS failed_before=$failures
  shift
  local out
  if ! out=$("${NS[@]}" "$HELM" install hami deploy/helm/hami -n kube-system --kubeconfig "$D/admin.kubeconfig" \
    "$@" -f "$D/sim-values.yaml" 2>&1); then
    check fail "[$label] helm install: $(tail -3 <<<"$out")"
    "${NS[@]}" "$HELM" uninstall hami -n kube-system --kubeconfig "$D/admin.kubeconfig" >/dev/null 2>&1
    return
  fi
  check ok "[$label] helm install: $(grep -m1 '^STATUS' <<<"$out")"
  wait_until 120 ready scheduler
  local images
  images=$(K -n kube-system get pod -l app.kubernetes.io/instance=hami -o jsonpath='{range .items[*]}{range .spec.containers[*]}{.image}{" "}{end}{end}')
  check "$(ready scheduler && echo ok)" "[$label] scheduler Deployment: pod Ready ($(K -n kube-system get pod -l app.kubernetes.io/component=scheduler --no-headers 2>&1 | head -1))"
  wait_until 120 ready device-plugin
  check "$(ready device-plugin && echo ok)" "[$label] device-plugin DaemonSet: pod Ready on $NODE; images: $images"
  check "$(cmp -s "$HOOK/vgpu/libvgpu.so" "$B/src/libvgpu.so" && echo ok)" \
    "[$label] the init container put the image's libvgpu.so in $HOOK/vgpu"
  gpus() { [ "$(K get node "$NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 10 ]; }
  wait_until 60 gpus
  check "$(gpus && echo ok)" "[$label] the plugin pod registered with kubelet: nvidia.com/gpu 10"

  local created=0
  K create -f - >/dev/null <<EOF && created=1
apiVersion: v1
kind: Pod
metadata: {name: gpu-pod, namespace: default}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: hami-e2e/cuda-client:1
    imagePullPolicy: Never
    command: [/bin/sh, -c, "cuda-client init ctx:0 meminfo alloc:1000m sleep:600000"]
    env:
    - {name: SIMGPU_DEVICES, value: "$GPU:16384m"}
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 3000, nvidia.com/gpucores: 30}
EOF
  local sched
  sched=$(K get pod gpu-pod -o jsonpath='{.spec.schedulerName}' 2>/dev/null)
  check "$([ "$sched" = hami-scheduler ] && echo ok)" "[$label] webhook: the GPU pod's schedulerName is '$sched'"
  if [ $created = 1 ]; then gpu_pod_checks "$label"; fi
  if [ $failures -gt "$failed_before" ]; then
    # The pods' logs go with the node: kept here for a look.
    local f=$D/pods-${label//[^a-z0-9]/-}.log
    { K get pods -A -o wide; K describe pods -A; } >"$f" 2>&1
    for p in $(K -n kube-system get pod -l app.kubernetes.io/instance=hami -o name 2>/dev/null); do
      echo "=== $p" && K -n kube-system logs "$p" --all-containers
    done >>"$f" 2>&1
    log "[$label] pods, events and logs in $f"
  fi
  K delete pod gpu-pod --wait=false >/dev/null
  if [ "$label" = "$LAST" ]; then
    # The teardown stops what is left; waiting for it here adds nothing.
    local rc=0
    "${NS[@]}" "$HELM" uninstall hami -n kube-system --kubeconfig "$D/admin.kubeconfig" >/dev/null 2>&1 || rc=$?
    check "$([ $rc = 0 ] && echo ok)" "[$label] helm uninstall ($((SECONDS - t0)) s for this install)"
    return
  fi
  "${NS[@]}" "$HELM" uninstall hami -n kube-system --kubeconfig "$D/admin.kubeconfig" --wait --timeout 60s >/dev/null 2>&1
  gone() { [ -z "$(K -n kube-system get pod -l app.kubernetes.io/instance=hami -o name 2>/dev/null)" ] &&
    [ -z "$(K get pod gpu-pod -o name 2>/dev/null)" ]; }
  wait_until 60 gone
  check "$(gone && echo ok)" "[$label] helm uninstall: the pods are gone ($((SECONDS - t0)) s for this install)"
}

LAST="chart's values"
[ -f "$UPSTREAM/values.yaml" ] && LAST="upstream v2.10 values"
install "chart's values"
if [ -f "$UPSTREAM/values.yaml" ]; then
  # Upstream's images are projecthami/hami; ours are two: an operator names them.
  install "upstream v2.10 values" -f "$UPSTREAM/values.yaml" \
    --set scheduler.extender.image.repository=hami-scheduler \
    --set devicePlugin.image.repository=hami-device-plugin \
    --set devicePlugin.monitor.image.repository=hami-device-plugin \
    --set global.imageTag="$(awk -F'"' '/^appVersion:/ {print $2}' deploy/helm/hami/Chart.yaml)"
else
  log "skip: no upstream chart at $UPSTREAM (set HAMI_UPSTREAM_CHART)"
fi

if [ $failures -gt 0 ]; then
  log "$failures check(s) failed; logs in $N/logs and $D/logs, pods' in /var/log/pods"
  exit 1
fi
log "all checks passed"
