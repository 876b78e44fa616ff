#!/usr/bin/env bash
# Scenarios on the real node (docs/e2e-node.md), by hand until they join
# .ci/run: everything runs in the private network namespace, and everything
# started is stopped on exit, failures and Ctrl-C included.
#
#   tests/e2e/node_scenarios.sh
#   tests/e2e/node_scenarios.sh --check-prerequisites   what the machine must give, then exit
#   tests/e2e/node_scenarios.sh --bench-pods N [FILE]
#       instead of the scenarios: N GPU pods (100 MiB each, the plugin's
#       --device-split-count raised to N) created at once; their
#       create-to-Running times, p50 and p99, written to FILE (default
#       bench/results/e2e-node-pods.txt) with the machine they ran on
#
# Needs root, kubelet (tests/e2e/build-k8s.sh --with-kubelet), our daemons
# in $HAMI_E2E_BUILD (default build/e2e; targets hami-scheduler
# hami-device-plugin) and in build/release the test client and the node agent
# (cuda-client, vgpu_lib, simcuda, simnvml, hami-node-agent). Prints one line
# per check; exit 1 if any failed.
#
# 1. a pod with gpumem 3000 sees a 3000 MiB GPU and is refused past it, as
#    its own exit code (checked through the pod's phase) says;
# 2. two pods of 6000 MiB share the one 16 GiB GPU;
# 3. a pod of 20000 MiB stays Pending, with our reason in its event;
# 4. hami-node-agent, run as its DaemonSet runs it (host PIDs, the plugin's
#    hook path, pod names from the API server), maps a running pod's CUDA
#    process from runc's PID namespace to its host PID and reports its memory
#    and utilisation under its namespace, pod and container names;
# 5. kubelet restarted: the plugin registers again within 5 s, the running
#    pod keeps its container and devices, a new pod is allocated;
# 6. the device plugin restarted: the same;
# 7. a pod deleted gives its GPU memory back: a pod that did not fit runs;
# 8. no way out through namespaces: in a GPU pod, under the seccomp profile
#    the webhook gives it, `unshare -Urm` fails as uid 65534; in a pod
#    without GPUs (the runtime's Unconfined) the same command works;
# 9. upstream's runtimeClassName and overwriteEnv (the scheduler's device
#    config): the GPU pod of 8 runs under RuntimeClass nvidia, whose handler
#    (node.sh's logging runc wrapper) creates its container; the pod without
#    GPUs gets NVIDIA_VISIBLE_DEVICES=none and runs under plain runc.
# 10. live resize: `kubectl annotate` past what the GPU has is refused with
#    a ResizeRefused Event; to 4000 MiB, a pod's running process started at
#    2000 MiB allocates 3500 MiB, its container not restarted;
# 11. a burst of seven pods of one size, kubelet restarted in the middle:
#    every container sees its own pod's limit (no plans swapped);
# 12. static MIG: the plugin over a partitioned GPU registers its MIG
#    devices; a pod with nvidia.com/vgpu-mode: mig runs on the one large
#    enough, by its MIG UUID, limited inside it;
# 13. dynamic MIG: the plugin over a GPU with MIG on and no instances, in
#    operatingmode mig with an allowlist, registers its profiles; a pod with
#    nvidia.com/vgpu-mode: mig gets a profile and placement from the
#    scheduler (signed), the plugin makes the MIG device at Allocate and the
#    pod runs on it by its MIG UUID, limited inside it.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=$PWD
export HAMI_E2E_DIR=${HAMI_E2E_DIR:-/tmp/hami-e2e-node}
D=$HAMI_E2E_DIR
N=$D/node
NS=("$R/tests/e2e/netns.sh" run)
BIN=${HAMI_E2E_CACHE:-$HOME/.cache/hami-e2e}/bin
B=${HAMI_E2E_BUILD:-build/e2e}
GPU=GPU-aaaa0000-0000-0000-0000-000000000001
failures=0

log() { printf 'node-scenarios: %s\n' "$*" >&2; }
# One line per check, with the seconds since the script started.
check() {
  if [ "$1" = ok ]; then printf 'ok    %4ds  %s\n' $SECONDS "$2"; else
    printf 'FAIL  %4ds  %s\n' $SECONDS "$2"
    failures=$((failures + 1))
  fi
}
K() { "${NS[@]}" "$BIN/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@" 2> >(grep -v '^netns:' >&2); }

# What no script here can provide; said loudly, never skipped.
prerequisites() {
  local bad=0
  if [ "$(id -u)" -ne 0 ]; then
    log "needs root (containerd, runc, network namespaces, kubelet's cgroups): run as root," \
      "or HAMI_E2E_NODE=0 tests/e2e/run.sh for the control plane alone"
    bad=1
  fi
  if ! grep -qE '^cgroup2? /sys/fs/cgroup' /proc/self/mounts &&
    ! grep -qE ' /sys/fs/cgroup/(cpu|memory)[, ]' /proc/self/mounts; then
    log "no cgroup hierarchy under /sys/fs/cgroup: kubelet cannot run pods; mount cgroups (or use a VM, not an unprivileged container)"
    bad=1
  fi
  if pgrep -x kubelet >/dev/null; then
    log "a kubelet already runs on this machine (PID $(pgrep -x kubelet | head -1)); only one real node fits: stop it, or HAMI_E2E_NODE=0"
    bad=1
  fi
  return $bad
}
if [ "${1:-}" = --check-prerequisites ]; then
  prerequisites
  exit
fi
BENCH_PODS=0
if [ "${1:-}" = --bench-pods ]; then
  BENCH_PODS=${2:?--bench-pods needs a number of pods}
  BENCH_OUT=${3:-$R/bench/results/e2e-node-pods.txt}
fi
SPLIT=$((BENCH_PODS > 10 ? BENCH_PODS : 10))
prerequisites || exit 2

for f in "$B/src/hami-scheduler" "$B/src/hami-device-plugin" build/release/src/hami-node-agent build/release/tests/vgpu/cuda-client \
  build/release/src/libvgpu.so build/release/tests/support/simgpu/lib/libnvidia-ml.so "$BIN/kubelet"; do
  [ -e "$f" ] || {
    log "missing $f (see the header)"
    exit 2
  }
done

# A stop that leaves state behind fails the run: the next one would not
# start clean.
teardown() {
  local rc=$?
  if ! "${NS[@]}" tests/e2e/node.sh stop >"$D.stop.log" 2>&1; then
    log "node.sh stop failed, the machine is not clean ($D.stop.log): $(tail -3 "$D.stop.log")"
    rc=1
  fi
  "${NS[@]}" tests/e2e/control-plane.sh stop >/dev/null 2>&1
  tests/e2e/netns.sh delete
  exit $rc
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

# Our daemons are started like the node's own (spawn, a pid file under the
# node's directory), so node.sh stop stops them by PID.
PIDS=$N/pids
LOGS=$N/logs
die() {
  log "$*"
  exit 1
}
# shellcheck source=tests/e2e/processes.sh
source "$R/tests/e2e/processes.sh"
SIM_ENV=(SIMGPU_STATE="$N/dp/gpu.state" SIMGPU_DEVICES="$GPU:16384m" SIMGPU_NAMES="NVIDIA H100")
SIM_NVML=$R/build/release/tests/support/simgpu/lib/libnvidia-ml.so

# Upstream's runtimeClassName and overwriteEnv (issue 38): GPU pods run under
# RuntimeClass nvidia, whose handler is node.sh's logging runc wrapper.
mkdir -p "$N/sched"
cat >"$N/sched/device-config.yaml" <<EOF
nvidia:
  runtimeClassName: nvidia
  overwriteEnv: true
EOF
K apply -f - >/dev/null <<EOF
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia}
handler: nvidia
EOF
spawn hami-scheduler "${NS[@]}" "$B/src/hami-scheduler" \
  --kubeconfig="$HAMI_E2E_SCHEDULER_KUBECONFIG" --device-config-file="$N/sched/device-config.yaml" \
  --http_bind="127.0.0.1:$HAMI_E2E_EXTENDER_PORT" --cert_file="$HAMI_E2E_CERT" \
  --key_file="$HAMI_E2E_KEY" --client-ca-file="$HAMI_E2E_CLIENT_CA" \
  --metrics-bind-address="127.0.0.1:$HAMI_E2E_METRICS_PORT" \
  --decision-key-file="$HAMI_E2E_DECISION_KEY" --decision-writers=hami-scheduler,hami-device-plugin
mkdir -p "$N/hook/vgpu" "$N/dp"
cp build/release/src/libvgpu.so "$N/hook/vgpu/"
start_plugin() {
  (cd "$N/dp" && spawn hami-device-plugin "${NS[@]}" env "${SIM_ENV[@]}" \
    "$R/$B/src/hami-device-plugin" --node-name="$HAMI_E2E_NODE_NAME" \
    --kubeconfig="$HAMI_E2E_DEVICE_PLUGIN_KUBECONFIG" \
    --device-plugin-path="$HAMI_E2E_DEVICE_PLUGIN_DIR" \
    --hook-path="$N/hook" --lock-dir="$N/dp/vgpulock" --nvml-library="$SIM_NVML" \
    --decision-key-file="$HAMI_E2E_DECISION_KEY" --device-split-count="$SPLIT" \
    "${PLUGIN_EXTRA[@]}")
}
PLUGIN_EXTRA=()
start_plugin
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
gpus_listed() { [ "$(K get node "$HAMI_E2E_NODE_NAME" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = "$SPLIT" ]; }
wait_until 30 gpus_listed
check "$(gpus_listed && echo ok)" "the device plugin registered with the real kubelet: nvidia.com/gpu $SPLIT"

# How often the plugin has registered with a kubelet (its log says so each time).
registrations() { grep -c "registered with kubelet at" "$LOGS/hami-device-plugin.log" 2>/dev/null || echo 0; }
pod() {  # pod NAME MIB COMMAND...
  pod_yaml "$@" | K create -f - >/dev/null
}
pod_yaml() {  # pod_yaml NAME MIB COMMAND...: pod's manifest
  local name=$1 mib=$2
  shift 2
  local cmd
  cmd=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default}
spec:
  restartPolicy: Never
  dnsPolicy: Default
  # PID 1 of a container ignores SIGTERM: kubelet kills it after the grace period.
  terminationGracePeriodSeconds: 1
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

if [ "$BENCH_PODS" -gt 0 ]; then
  # shellcheck source=tests/e2e/node_bench.sh
  source "$R/tests/e2e/node_bench.sh"
  bench_pods "$BENCH_PODS" "$BENCH_OUT" || failures=$((failures + 1))
  [ $failures -eq 0 ] || exit 1
  exit 0
fi

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

K delete pod fill share-a share-b too-big --wait=false >/dev/null

# 4. The node agent as its DaemonSet runs it: the host's PIDs (it runs in the
# host PID namespace), the plugin's hook path, pod names through the API
# server with the plugin's account, the simulated NVML. Its hook path is
# the plugin's vgpu directory, as in the chart.
AGENT_PORT=$(free_port)
spawn hami-node-agent "${NS[@]}" env "${SIM_ENV[@]}" build/release/src/hami-node-agent \
  --hook-path="$N/hook/vgpu" --node-name="$HAMI_E2E_NODE_NAME" --interval=500ms \
  --metrics-bind-address="127.0.0.1:$AGENT_PORT" --pod-names=api \
  --kubeconfig="$HAMI_E2E_DEVICE_PLUGIN_KUBECONFIG" --nvml-library="$SIM_NVML"
wait_for hami-node-agent 20 "${NS[@]}" curl -sf "http://127.0.0.1:$AGENT_PORT/healthz"
# A CUDA process that stays: 1000 MiB and some kernels, then sleeps.
CLIENT=(/bin/cuda-client init ctx:0 alloc:1000m launchpath:kernel:2000 sleep:600000)
pod holder 2000 "${CLIENT[@]}"
running() { [ "$(phase "$1")" = Running ]; }
wait_until 60 running holder
host_pid=$(pgrep -f "^${CLIENT[*]}\$" | head -1)
# The process's PID inside its container: the last of its NSpid chain.
ns_pid=$(awk '/^NSpid:/ {print $NF}' "/proc/${host_pid:-0}/status" 2>/dev/null)
agent_json() { "${NS[@]}" curl -sf "http://127.0.0.1:$AGENT_PORT/containers" 2>/dev/null; }
agent_metrics() { "${NS[@]}" curl -sf "http://127.0.0.1:$AGENT_PORT/metrics" 2>/dev/null; }
# "PID HOST_PID" of the holder pod's processes, as the agent sees them.
agent_pids() {
  agent_json | python3 -c 'import json, sys
for c in json.load(sys.stdin)["containers"]:
    if (c["namespace"], c["pod"], c["container"]) == ("default", "holder", "main"):
        for p in c["processes"]:
            if p["live"]: print(p["pid"], p.get("host_pid", "-"))'
}
mapped() { [ "$(agent_pids)" = "$ns_pid $host_pid" ]; }
wait_until 20 mapped
check "$([ -n "$host_pid" ] && [ "$ns_pid" != "$host_pid" ] && mapped && echo ok)" \
  "node agent: the pod's CUDA process, PID $ns_pid in its container, is host PID $host_pid (agent: $(agent_pids))"
used() {
  agent_metrics | awk '/^hami_vgpu_memory_used_bytes\{/ && /namespace="default"/ && /pod="holder"/ &&
    /container="main"/ {print $NF}'
}
util_series() {
  agent_metrics | grep -c '^hami_container_device_utilization_ratio{.*namespace="default".*pod="holder".*container="main"'
}
wait_until 20 eval '[ "$(used)" -ge $((1000 << 20)) ] 2>/dev/null'
check "$([ "$(used)" -ge $((1000 << 20)) ] 2>/dev/null && [ "$(util_series)" -ge 1 ] && echo ok)" \
  "node agent: /metrics has default/holder/main using $(used) bytes, $(util_series) utilisation series"

# A small pod that must be allocated by whichever kubelet and plugin run now.
fresh_pod() {
  pod "$1" 1000 /bin/sh -c 'cuda-client init ctx:0 meminfo | grep -q "total=1048576000"'
  wait_until 60 ended "$1"
  [ "$(phase "$1")" = Succeeded ]
}
holder_id() { K get pod holder -o jsonpath='{.status.containerStatuses[0].containerID}/{.status.phase}'; }
holder_before=$(holder_id)
# The plugin noticing a new kubelet.sock and registering on it: timed from the
# socket's creation (its inode changes) to the plugin's log line.
sock_id() { stat -c '%i %z' "$HAMI_E2E_DEVICE_PLUGIN_DIR/kubelet.sock" 2>/dev/null || echo none; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'; }
under5() { awk -v s="$1" 'BEGIN {exit !(s < 5)}'; }
registered_since() { [ "$(registrations)" -gt "$1" ]; }

# 5. kubelet restarted.
regs=$(registrations)
old_sock=$(sock_id)
t_stop=$(date +%s.%N)
"${NS[@]}" tests/e2e/node.sh restart-kubelet >>"$D.start.log" 2>&1 &
restart_job=$!
wait_until 60 eval '[ "$(sock_id)" != "$old_sock" ] && [ "$(sock_id)" != none ]'
t_sock=$(date +%s.%N)
wait_until 30 registered_since "$regs"
secs=$(since "$t_sock")
total=$(since "$t_stop")
wait "$restart_job"
echo "measured: plugin re-registered ${secs} s after the new kubelet.sock (${total} s after kubelet was stopped)"
check "$(registered_since "$regs" && under5 "$secs" && echo ok)" \
  "kubelet restart: the plugin registered again within 5 s (${secs} s)"
check "$([ "$(holder_id)" = "$holder_before" ] && mapped && echo ok)" \
  "kubelet restart: the running pod kept its container and process ($(holder_id))"
check "$(fresh_pod after-kubelet && echo ok)" "kubelet restart: a new pod gets a 1000 MiB GPU ($(phase after-kubelet))"

# 6. The device plugin restarted.
regs=$(registrations)
stop_one "$PIDS/hami-device-plugin.pid" 10
cat "$LOGS/hami-device-plugin.log" >>"$LOGS/hami-device-plugin.previous.log"
t_start=$(date +%s.%N)
start_plugin
wait_until 30 eval '[ "$(grep -c "registered with kubelet at" "$LOGS/hami-device-plugin.log")" -ge 1 ]'
secs=$(since "$t_start")
echo "measured: the restarted plugin registered ${secs} s after it was started"
check "$(grep -q "registered with kubelet at" "$LOGS/hami-device-plugin.log" && under5 "$secs" && echo ok)" \
  "device plugin restart: registered again within 5 s (${secs} s)"
check "$([ "$(holder_id)" = "$holder_before" ] && mapped && echo ok)" \
  "device plugin restart: the running pod kept its container and process"
check "$(fresh_pod after-plugin && echo ok)" "device plugin restart: a new pod gets a 1000 MiB GPU ($(phase after-plugin))"

# 7. Deletion gives capacity back: with holder (2000) and hog (12000) on the
# 16384 MiB GPU, a 6000 MiB pod fits only once hog is gone.
K delete pod after-kubelet after-plugin --wait=false >/dev/null
pod hog 12000 /bin/sleep 600
wait_until 60 running hog
pod waiter 6000 /bin/sh -c 'cuda-client init ctx:0 meminfo | grep -q "total=6291456000"'
wait_until 20 eval '[ -n "$(K get events --field-selector involvedObject.name=waiter -o jsonpath="{.items[*].message}")" ]'
pending_before=$(phase waiter)
K delete pod hog --wait=false >/dev/null
wait_until 90 ended waiter
check "$([ "$pending_before" = Pending ] && [ "$(phase waiter)" = Succeeded ] && echo ok)" \
  "pod deletion: a 6000 MiB pod Pending beside a 12000 MiB one ran once that was deleted ($pending_before, then $(phase waiter))"

# 8. A user namespace would let the process mount over /etc/ld.so.preload
# and the limits file (issue 36): the runtime's default profile refuses
# unshare(CLONE_NEWUSER) to a process without CAP_SYS_ADMIN.
K delete pod holder waiter --wait=false >/dev/null
unshare_pod() {  # unshare_pod NAME LIMITS
  K create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  restartPolicy: Never
  dnsPolicy: Default
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 65534, runAsGroup: 65534}
  containers:
  - name: main
    image: hami-e2e/cuda-client:1
    imagePullPolicy: Never
    command: [/bin/sh, -c, 'if unshare -Urm true 2>&1; then echo unshared; else echo refused; fi']
    resources: {limits: $2}
EOF
}
unshare_pod escape '{nvidia.com/gpu: 1, nvidia.com/gpumem: 1000}'
unshare_pod no-gpu '{cpu: 100m}'
wait_until 60 ended escape
wait_until 60 ended no-gpu
# unshare's complaint goes to stdout too: the runtime reads stdout and stderr
# through two pipes, so a line on each can reach the log in either order.
said() { K logs "$1" 2>/dev/null | tail -1; }
profile=$(K get pod escape -o jsonpath='{.spec.securityContext.seccompProfile.type}')
check "$([ "$profile" = RuntimeDefault ] && [ "$(said escape)" = refused ] && echo ok)" \
  "a GPU pod runs under seccomp $profile: unshare -Urm as uid 65534 $(said escape)"
check "$([ "$(said no-gpu)" = unshared ] && echo ok)" \
  "a pod without GPUs (Unconfined): unshare -Urm $(said no-gpu), so the GPU pod's refusal is the profile's"

# 9. Upstream's runtimeClassName and overwriteEnv: the webhook put the GPU pod
# under RuntimeClass nvidia, whose handler (node.sh's runc wrapper) created
# its container; the pod without GPUs ran under runc, told to see no GPU.
ran_by_nvidia() {  # ran_by_nvidia POD: its container was created through the nvidia handler
  local id
  id=$(K get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
  id=${id#containerd://}
  [ -n "$id" ] && grep -q "create .*$id" "$N/runc-nvidia.log" 2>/dev/null
}
class=$(K get pod escape -o jsonpath='{.spec.runtimeClassName}')
check "$([ "$class" = nvidia ] && ran_by_nvidia escape && echo ok)" \
  "runtimeClassName: the webhook set RuntimeClass '$class' on the GPU pod, and containerd's nvidia handler created its container ($(grep -c create "$N/runc-nvidia.log" 2>/dev/null || echo 0) creates logged)"
env_of=$(K get pod no-gpu -o jsonpath='{range .spec.containers[0].env[*]}{.name}={.value}{end}')
check "$([ -z "$(K get pod no-gpu -o jsonpath='{.spec.runtimeClassName}')" ] && ! ran_by_nvidia no-gpu &&
  [ "$env_of" = NVIDIA_VISIBLE_DEVICES=none ] && echo ok)" \
  "overwriteEnv: the pod without GPUs got env '$env_of' and ran under runc, not the nvidia handler"

# 10. Live resize (issue 37): the process waits (bounded) until its GPU shows
# 4000 MiB, then allocates past the 2000 MiB it started with.
K delete pod escape no-gpu --wait=false >/dev/null
GROW=(cuda-client init ctx:0 alloc:1500m waittotal:4000m:120000 alloc:2000m meminfo)
pod grow 2000 /bin/sh -c "${GROW[*]}; sleep 600"
wait_until 60 running grow
wait_until 20 eval 'pgrep -f "^${GROW[*]}\$" >/dev/null'
grow_pid=$(pgrep -f "^${GROW[*]}\$" | head -1)
K annotate pod grow nvidia.com/vgpu-resize=gpumem=20000 --overwrite >/dev/null
refusal() { K get events --field-selector involvedObject.name=grow,reason=ResizeRefused -o jsonpath='{.items[*].message}'; }
wait_until 30 eval '[ -n "$(refusal)" ]'
check "$(refusal | grep -q "does not fit" && echo ok)" \
  "resize to 20000 MiB refused with an Event: $(refusal | head -c 160)"
K annotate pod grow nvidia.com/vgpu-resize=gpumem=4000 --overwrite >/dev/null
grown() { K logs grow 2>/dev/null | grep -q "op=alloc:2000m rc=0"; }
wait_until 60 grown
restarts=$(K get pod grow -o jsonpath='{.status.containerStatuses[0].restartCount}')
check "$([ -n "$grow_pid" ] && grown && [ "$restarts" = 0 ] && [ "$(phase grow)" = Running ] && echo ok)" \
  "live resize 2000 -> 4000 MiB: process $grow_pid, running before, allocated 1500 + 2000 MiB (restartCount $restarts, $(phase grow)): $(K logs grow 2>/dev/null | grep -o "op=alloc:2000m rc=[0-9]*\|total=[0-9]*" | tr '\n' ' ')"
K delete pod grow --wait=false >/dev/null

# 11. A burst onto the node (issue 39): seven pods of one size, each with
# its own gpumem, created in pairs 0.4 s apart (those that share a creation
# second are allocated one after another, the others may be in flight
# together), the last three while kubelet restarts. Each container prints what its GPU shows and
# checks it is its own pod's limit. kubelet 1.20 may refuse a pod it admits
# before the plugin has registered again (a status reason such as
# UnexpectedAdmissionError; the pod never runs): such a pod is created
# again, as its controller would.
wait_until 30 eval '! K get pod grow >/dev/null 2>&1'
burst_yaml() {  # burst_yaml NAME MIB
  pod_yaml "$1" "$2" /bin/sh -c "out=\$(cuda-client init ctx:0 meminfo); echo \"\$out\"
    echo \"\$out\" | grep -q total=$(($2 * 1048576))"
}
burst_pod() { burst_yaml "$@" | K create -f - >/dev/null; }
final=()
for i in 0 2 4 6; do
  if [ $i = 4 ]; then
    # kubelet stopped once the first four ran (none of their Allocate
    # answers in flight: see the limit in docs/scheduler-protocol.md), the
    # rest bound while it is down and admitted by the new one in one batch.
    for p in "${final[@]}"; do wait_until 120 ended "$p"; done
    "${NS[@]}" tests/e2e/node.sh restart-kubelet >>"$D.start.log" 2>&1 &
    restart_job=$!
    wait_until 15 eval '! pgrep -x kubelet >/dev/null'
  fi
  # Two pods in one request (created in the same second, as a controller
  # creates them) but the last.
  { burst_yaml "burst-$i" $((600 + 100 * i))
    [ $i = 6 ] || { echo ---; burst_yaml "burst-$((i + 1))" $((700 + 100 * i)); }; } |
    K create -f - >/dev/null
  final+=("burst-$i")
  [ $i = 6 ] || final+=("burst-$((i + 1))")
  sleep 0.4
done
wait "$restart_job"
for p in "${final[@]}"; do wait_until 120 ended "$p"; done
refused=0
for i in 0 1 2 3 4 5 6; do
  # A pod kubelet refused has a status reason; a container that failed
  # its own check has none.
  reason=$(K get pod "burst-$i" -o jsonpath='{.status.reason}')
  if [ -n "$reason" ]; then
    log "burst-$i refused by kubelet: $reason: $(K get pod "burst-$i" -o jsonpath='{.status.message}')"
    refused=$((refused + 1))
    burst_pod "burst-$i-again" $((600 + 100 * i))
    final[i]="burst-$i-again"
    wait_until 120 ended "burst-$i-again"
  fi
done
own=0
swapped=0
seconds=$(for p in "${final[@]}"; do K get pod "$p" -o jsonpath='{.metadata.creationTimestamp}{"\n"}'; done | sort -u | wc -l)
for i in 0 1 2 3 4 5 6; do
  p=${final[i]}
  mib=$((600 + 100 * i))
  decided=$(K get pod "$p" -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}')
  seen=$(K logs "$p" 2>/dev/null | grep -o 'total=[0-9]*' | head -1)
  if [ -n "$seen" ] && [ "$seen" != "total=$((mib * 1048576))" ]; then
    swapped=$((swapped + 1))
    log "$p (gpumem $mib) saw $seen"
  fi
  [ "$(phase "$p")" = Succeeded ] && [[ "$decided" == *",NVIDIA,$mib,"* ]] && own=$((own + 1))
done
check "$([ $own = 7 ] && [ $swapped = 0 ] && echo ok)" \
  "burst of 7 pods (created in $seconds distinct seconds, kubelet restarted mid-burst, $refused refused by kubelet's admission and created again): $own of 7 ran with their own pod's limit, $swapped saw another's"

# 12. Static MIG (issue 40, docs/mig.md): the plugin restarted over a GPU
# partitioned 3g.40gb + 1g.10gb (an H100 80GB, simulated). Its two MIG
# devices are registered with mode mig and advertised; a pod of 20000 MiB
# with nvidia.com/vgpu-mode: mig goes to the 3g.40gb, gets it by its MIG UUID
# and sees a 20000 MiB GPU inside it. The pod's simulated driver is
# partitioned alike (same GPU, same creations: same MIG UUIDs); the runtime
# would turn NVIDIA_VISIBLE_DEVICES into the devices the container sees, the
# pod does it itself.
stop_one "$PIDS/hami-device-plugin.pid" 10
cat "$LOGS/hami-device-plugin.log" >>"$LOGS/hami-device-plugin.previous.log"
SIM_ENV=(SIMGPU_STATE="$N/dp/gpu-mig.state" SIMGPU_DEVICES="$GPU:80g"
  SIMGPU_NAMES="NVIDIA H100 80GB HBM3" SIMGPU_MIG="0:3g.40gb,1g.10gb")
start_plugin
allocatable() { K get node "$HAMI_E2E_NODE_NAME" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'; }
registered() { K get node "$HAMI_E2E_NODE_NAME" -o jsonpath='{.metadata.annotations.hami\.io/node-nvidia-register}'; }
# "<profile>:<mode> ..." of the registered devices.
registered_modes() {
  registered | python3 -c 'import json, sys
print(" ".join(d["type"].split(" MIG ")[-1] + ":" + d.get("mode", "") for d in json.load(sys.stdin)))'
}
want_modes="3g.40gb:mig 1g.10gb:mig"
wait_until 30 eval '[ "$(allocatable)" = $((2 * SPLIT)) ] && [ "$(registered_modes)" = "$want_modes" ]'
check "$([ "$(allocatable)" = $((2 * SPLIT)) ] && [ "$(registered_modes)" = "$want_modes" ] && echo ok)" \
  "static MIG: two MIG devices advertised ($(allocatable) IDs) and registered: $(registered_modes)"
big_mig=$(registered | python3 -c 'import json, sys
print(next((d["id"] for d in json.load(sys.stdin) if d["type"].endswith("3g.40gb")), "none"))')
# create_mig_pod NAME MIB ENV [VOLUMES]: a pod with nvidia.com/vgpu-mode: mig
# asking for MIB of one GPU, which prints the device it was given and passes
# if its GPU shows MIB. ENV: lines added to its env (a volumeMounts: block of
# the container may follow them); VOLUMES: the pod's volumes: block.
create_mig_pod() {
  local name=$1 mib=$2 extra=$3 volumes=${4:-}
  K create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: default
  annotations: {nvidia.com/vgpu-mode: mig}
spec:
  restartPolicy: Never
  dnsPolicy: Default
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: hami-e2e/cuda-client:1
    imagePullPolicy: Never
    command:
    - /bin/sh
    - -c
    - |
      echo "visible=\$NVIDIA_VISIBLE_DEVICES"
      out=\$(CUDA_VISIBLE_DEVICES=\$NVIDIA_VISIBLE_DEVICES cuda-client init ctx:0 meminfo)
      echo "\$out"
      echo "\$out" | grep -q total=$((mib * 1048576))
    env:
    - {name: SIMGPU_DEVICES, value: "$GPU:80g"}
    - {name: SIMGPU_NAMES, value: "NVIDIA H100 80GB HBM3"}
$extra
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: $mib}
$volumes
EOF
}
create_mig_pod mig 20000 '    - {name: SIMGPU_MIG, value: "0:3g.40gb,1g.10gb"}'
wait_until 60 ended mig
mig_decided=$(K get pod mig -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}')
mig_log=$(K logs mig 2>/dev/null)
mig_seen=$(echo "$mig_log" | grep -o 'total=[0-9]*' | head -1)
mig_visible=$(echo "$mig_log" | grep '^visible=' | head -1)
check "$([ "$(phase mig)" = Succeeded ] && [[ "$mig_decided" == "$big_mig,NVIDIA,20000,"* ]] &&
  [ "$mig_visible" = "visible=$big_mig" ] && echo ok)" \
  "static MIG: a pod of 20000 MiB ran on the 3g.40gb $big_mig ($mig_decided), given $mig_visible, and saw $mig_seen ($(phase mig))"

# 13. Dynamic MIG (issue 40, docs/mig-dynamic.md): the plugin restarted over
# an H100 80GB (simulated) with MIG on and no instances, operatingmode mig and
# an allowlist. It registers the GPU with its allowed profiles; a pod of 8000
# MiB with nvidia.com/vgpu-mode: mig gets the smallest profile that holds it
# and a placement from our scheduler (hami.io/vgpu-mig-allocations, covered
# by the decision's signature), the plugin makes that MIG device at Allocate
# and records its UUID, and the pod runs on it, limited inside it. The pod
# sees the plugin's simulated GPU (its state file, by hostPath), as a
# container sees the node's GPU.
stop_one "$PIDS/hami-device-plugin.pid" 10
cat "$LOGS/hami-device-plugin.log" >>"$LOGS/hami-device-plugin.previous.log"
cat >"$N/dp/dynamic-mig.yaml" <<EOF
nvidia:
  migProfileAllowlist:
  - models: ["H100-SXM5-80GB"]
    profiles: ["1g.10gb", "3g.40gb", "7g.80gb"]
nodeconfig:
- name: $HAMI_E2E_NODE_NAME
  operatingmode: mig
EOF
SIM_ENV=(SIMGPU_STATE="$N/dp/gpu-dmig.state" SIMGPU_DEVICES="$GPU:80g"
  SIMGPU_NAMES="NVIDIA H100 80GB HBM3" SIMGPU_MIG="0:on")
PLUGIN_EXTRA=(--config-file="$N/dp/dynamic-mig.yaml" --mig-apply-lock="$N/dp/mig-apply.lock")
start_plugin
# "<mode>:<profiles>" of the registered devices.
registered_profiles() {
  registered | python3 -c 'import json, sys
print(" ".join(d.get("mode", "") + ":" + ",".join(p["name"] for p in d.get("migProfiles", []))
               for d in json.load(sys.stdin)))'
}
want_profiles="mig:1g.10gb,3g.40gb,7g.80gb"
wait_until 30 eval '[ "$(allocatable)" = 7 ] && [ "$(registered_profiles)" = "$want_profiles" ]'
check "$([ "$(allocatable)" = 7 ] && [ "$(registered_profiles)" = "$want_profiles" ] && echo ok)" \
  "dynamic MIG: the GPU registered with its allowed profiles ($(registered_profiles)), $(allocatable) IDs"
create_mig_pod dmig 8000 '    - {name: SIMGPU_STATE, value: /sim/gpu-dmig.state}
    volumeMounts:
    - {name: sim, mountPath: /sim}' "  volumes:
  - name: sim
    hostPath: {path: \"$N/dp\", type: Directory}"
wait_until 60 ended dmig
dmig_alloc=$(K get pod dmig -o jsonpath='{.metadata.annotations.hami\.io/vgpu-mig-allocations}')
dmig_signed=$(K get pod dmig -o jsonpath='{.metadata.annotations.hami\.io/decision-signature}')
# "<profile> <migUUID>" of the pod's one entry.
dmig_made=$(echo "$dmig_alloc" | python3 -c 'import json, sys
a = json.load(sys.stdin)
print(a[0]["profile"], a[0].get("migUUID", "none") if len(a) == 1 else "entries=%d" % len(a))' 2>/dev/null)
dmig_log=$(K logs dmig 2>/dev/null)
dmig_seen=$(echo "$dmig_log" | grep -o 'total=[0-9]*' | head -1)
dmig_visible=$(echo "$dmig_log" | grep '^visible=' | head -1)
check "$([ "$(phase dmig)" = Succeeded ] && [ -n "$dmig_signed" ] && [[ "$dmig_made" == "1g.10gb MIG-"* ]] &&
  [ "$dmig_visible" = "visible=${dmig_made#* }" ] && echo ok)" \
  "dynamic MIG: a pod of 8000 MiB got a new ${dmig_made:-<none>} (signed: ${dmig_signed:+yes}), given $dmig_visible, and saw $dmig_seen ($(phase dmig))"

if [ $failures -gt 0 ]; then
  log "$failures check(s) failed; logs in $N/logs and $D/logs"
  exit 1
fi
log "all checks passed"
