#!/usr/bin/env bash
# A real Kubernetes node for the end-to-end suite: containerd (runc, the CNI
# bridge; runtime handler nvidia: runc through a wrapper that logs each call
# to $N/runc-nvidia.log) and kubelet 1.20, registered with the control plane
# that tests/e2e/control-plane.sh started. Images come from files on this machine
# (a static pause and busybox-static), imported without a registry.
#
#   tests/e2e/node.sh start [NAME]   start the node (default name hami-e2e-node)
#   tests/e2e/node.sh stop           stop it by PID and remove the host state it made
#   tests/e2e/node.sh restart-kubelet
#                                    stop kubelet by PID and start it again (pods keep running)
#   tests/e2e/node.sh status         what runs
#   tests/e2e/node.sh env            print `export ...` lines for the shell
#   tests/e2e/node.sh client-image BUILD_DIR
#                                    import hami-e2e/cuda-client:1: BUILD_DIR's
#                                    cuda-client and simulated driver and NVML,
#                                    with busybox and the C/C++ runtime
#
# Needs root, the control plane running (HAMI_E2E_DIR, default
# /tmp/hami-e2e), kubelet built (tests/e2e/build-k8s.sh --with-kubelet) and
# Debian's containerd, runc, containernetworking-plugins and busybox-static
# (tests/e2e/node.sh installs them when missing).
#
# What this machine type needs, and why:
# - cgroupfs: PID 1 is not systemd; swap may be on (failSwapOn: false);
# - containerd's CRI restrict_oom_score_adj: runc cannot lower
#   oom_score_adj without CAP_SYS_RESOURCE;
# - kubelet 1.20 probes the cloud metadata address at start-up:
#   AWS_EC2_METADATA_DISABLED=true; --node-ip on the CNI bridge, which the
#   script creates first (kubelet refuses a loopback node IP);
# - no node lifecycle controller runs: the not-ready taint is lifted here
#   once kubelet reports Ready;
# - kubelet 1.20 keeps fixed paths outside --root-dir: the device plugins'
#   directory /var/lib/kubelet/device-plugins (the plugin registers there)
#   and the pods' logs under /var/log/pods and /var/log/containers. `start`
#   refuses to run beside another kubelet; `stop` removes what it made there.
#
# HAMI_E2E_NODE_BRIDGE   bridge name (default hami-e2e0)
# HAMI_E2E_NODE_SUBNET   pod subnet, /16 (default 10.88.0.0/16)
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

D=${HAMI_E2E_DIR:-/tmp/hami-e2e}
N=$D/node
PIDS=$N/pids
LOGS=$N/logs
BRIDGE=${HAMI_E2E_NODE_BRIDGE:-hami-e2e0}
SUBNET=${HAMI_E2E_NODE_SUBNET:-10.88.0.0/16}
PREFIX=${SUBNET%.0.0/16}
NODE_IP=$PREFIX.0.1
CACHE=${HAMI_E2E_CACHE:-$HOME/.cache/hami-e2e}
BIN=$CACHE/bin
HOST_PLUGINS=/var/lib/kubelet/device-plugins
HOST_DIRS=(/var/lib/kubelet /var/log/pods /var/log/containers)

log() { printf 'node: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}

usage() {
  sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

# free_port, spawn, live_pid, wait_for, stop_one, status.
# shellcheck source=tests/e2e/processes.sh
source "$REPO/tests/e2e/processes.sh"

PACKAGES=(containerd runc containernetworking-plugins busybox-static)

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  # Debian would start its own containerd service; this node runs its own.
  local rc_d=/usr/sbin/policy-rc.d made=0
  if [ ! -e $rc_d ]; then
    printf '#!/bin/sh\nexit 101\n' >$rc_d
    chmod +x $rc_d
    made=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
  [ $made -eq 1 ] && rm -f $rc_d
  return 0
}

CTR() { ctr --address "$N/containerd.sock" --namespace k8s.io "$@"; }
KUBECTL() { "$BIN/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@"; }

# make_image.py's arguments for busybox-static and the applets the tests use.
BUSYBOX=(--file /bin/busybox:/bin/busybox)
for a in sh sleep cat echo env ls mount grep test true false unshare; do BUSYBOX+=(--link "busybox:/bin/$a"); done

# The two images, built once per machine from files on it.
images() {
  local dir=$CACHE/images
  mkdir -p "$dir"
  if [ ! -f "$dir/pause.tar" ] || [ "$REPO/tests/e2e/node/pause.c" -nt "$dir/pause.tar" ]; then
    gcc -static -O2 -o "$dir/pause" "$REPO/tests/e2e/node/pause.c"
    python3 "$REPO/tests/e2e/node/make_image.py" hami-e2e/pause:1 "$dir/pause.tar" \
      --file "$dir/pause:/pause" --cmd /pause
  fi
  if [ ! -f "$dir/busybox.tar" ] || [ /bin/busybox -nt "$dir/busybox.tar" ]; then
    python3 "$REPO/tests/e2e/node/make_image.py" hami-e2e/busybox:1 "$dir/busybox.tar" \
      "${BUSYBOX[@]}" --cmd /bin/sh
  fi
  CTR images import "$dir/pause.tar" >/dev/null
  CTR images import "$dir/busybox.tar" >/dev/null
}

write_configs() {
  mkdir -p "$N/cni/net.d" "$N/cni/ipam" "$N/containerd/root" "$N/containerd/state" \
    "$N/kubelet"
  cat >"$N/cni/net.d/10-hami-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "hami-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$N/cni/ipam",
        "ranges": [[{"subnet": "$SUBNET", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
  cat >"$N/containerd.toml" <<EOF
version = 2
root = "$N/containerd/root"
state = "$N/containerd/state"
[grpc]
  address = "$N/containerd.sock"
[ttrpc]
  address = "$N/containerd.sock.ttrpc"
[debug]
  level = "info"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "hami-e2e/pause:1"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
    # Handler nvidia (RuntimeClass nvidia): a stand-in for NVIDIA's runtime,
    # runc through a wrapper that logs every call, so a scenario can tell
    # which handler ran a pod.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        SystemdCgroup = false
        BinaryName = "$N/runc-nvidia"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$N/cni/net.d"
EOF
  cat >"$N/runc-nvidia" <<EOF
#!/bin/sh
echo "\$*" >>"$N/runc-nvidia.log"
exec $(command -v runc || echo /usr/sbin/runc) "\$@"
EOF
  chmod +x "$N/runc-nvidia"
  cat >"$N/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
cgroupDriver: cgroupfs
failSwapOn: false
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
# The API server reaches kubelet (logs, exec) without a client certificate;
# kubelet listens only on the bridge, inside the suite's network namespace.
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
serializeImagePulls: false
resolvConf: /etc/resolv.conf
EOF
}

start() {
  local name=${1:-hami-e2e-node}
  [ "$(id -u)" -eq 0 ] || die "needs root (containerd, runc, network)"
  [ -f "$D/admin.kubeconfig" ] || die "no control plane in $D: run tests/e2e/control-plane.sh start first"
  [ -x "$BIN/kubelet" ] || die "no kubelet in $BIN: run tests/e2e/build-k8s.sh --with-kubelet first"
  [ -d "$PIDS" ] && for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    live_pid "$f" >/dev/null && die "already running ($f); run '$0 stop' first"
  done
  if pgrep -x kubelet >/dev/null; then
    die "a kubelet already runs on this machine; its fixed directories would be shared"
  fi
  install_packages
  rm -rf "$N"
  mkdir -p "$PIDS" "$LOGS"
  # Which of kubelet's fixed directories this node makes, so stop removes
  # only those.
  local d
  for d in "${HOST_DIRS[@]}"; do
    [ -e "$d" ] || echo "$d" >>"$N/made"
  done
  KUBELET_PORT=$(free_port)
  KUBELET_HEALTHZ_PORT=$(free_port)
  write_configs
  echo "$name" >"$N/name"
  echo "KUBELET_HEALTHZ_PORT=$KUBELET_HEALTHZ_PORT" >"$N/ports"

  # kubelet needs its node IP on a local interface before the first pod makes
  # the bridge; the CNI bridge plugin takes this one over.
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$NODE_IP/16" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up

  log "containerd ($N/containerd.sock)"
  spawn containerd containerd --config "$N/containerd.toml"
  wait_for containerd 30 CTR version
  images

  log "kubelet $name ($NODE_IP)"
  spawn_kubelet "$name"
  wait_for kubelet 60 KUBECTL get node "$name"
  wait_for kubelet 60 node_ready "$name"
  KUBECTL taint nodes "$name" node.kubernetes.io/not-ready- >/dev/null 2>&1 || true
  log "ready: node $name; logs in $LOGS"
}

spawn_kubelet() {
  spawn kubelet env AWS_EC2_METADATA_DISABLED=true "$BIN/kubelet" \
    --config="$N/kubelet.yaml" --kubeconfig="$D/admin.kubeconfig" \
    --container-runtime=remote --container-runtime-endpoint="unix://$N/containerd.sock" \
    --root-dir="$N/kubelet" --cert-dir="$N/kubelet/pki" \
    --hostname-override="$1" --node-ip="$NODE_IP" -v=2
}

# kubelet stopped by PID and started again with the same configuration, as a
# kubelet upgrade or crash would: containers keep running, the device plugins
# must register again on the new kubelet.sock. The old log is kept beside.
restart_kubelet() {
  [ -f "$N/name" ] || die "not started"
  live_pid "$PIDS/containerd.pid" >/dev/null || die "the node is not running"
  stop_one "$PIDS/kubelet.pid" 10
  [ -f "$LOGS/kubelet.log" ] && cat "$LOGS/kubelet.log" >>"$LOGS/kubelet.previous.log"
  spawn_kubelet "$(cat "$N/name")"
  wait_for kubelet 60 node_ready "$(cat "$N/name")"
  log "kubelet restarted"
}

node_ready() {
  [ "$(KUBECTL get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

stop() {
  [ -d "$N" ] || return 0
  # What the tests started on the node (pid files named for the command),
  # then kubelet.
  local f
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    case "$(basename "$f" .pid)" in kubelet | containerd) ;; *) stop_one "$f" 10 ;; esac
  done
  stop_one "$PIDS/kubelet.pid" 10
  # The pods' containers and sandboxes: their shims were started by our
  # containerd with our state directory on their command line.
  local pid
  if live_pid "$PIDS/containerd.pid" >/dev/null; then
    for t in $(CTR tasks ls -q 2>/dev/null); do
      CTR tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
    done
  fi
  # A shim killed leaves its socket in /run/containerd/s: the ones our shims
  # listen on are found through their file descriptors and removed after.
  # A shim may exit on its own meanwhile: nothing here may fail the stop.
  local sockets=() inode path
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $N/containerd.sock" || true); do
    for inode in $(find "/proc/$pid/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n'); do
      path=$(awk -v i="$inode" '$7 == i && $8 ~ /^\/run\/containerd\/s\// {print $8}' \
        "/proc/$pid/net/unix" 2>/dev/null || true)
      if [ -n "$path" ]; then sockets+=("$path"); fi
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  [ ${#sockets[@]} -eq 0 ] || rm -f "${sockets[@]}"
  stop_one "$PIDS/containerd.pid" 10
  # Mounts under the node's directories (volumes, rootfs, shm), deepest first.
  grep -F " $N/" /proc/self/mounts | awk '{print $2}' | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  # The network namespaces CNI made for our pods, and the bridge.
  for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  # kubelet's cgroups (cgroupfs driver): the pods' first, then kubepods.
  local c
  for c in /sys/fs/cgroup/*/kubepods; do
    [ -d "$c" ] || continue
    find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # Never delete through a mount that would not go.
  if grep -qF " $N/" /proc/self/mounts; then
    log "mounts under $N remain; left in place:"
    grep -F " $N/" /proc/self/mounts | awk '{print "  " $2}' >&2
    return 1
  fi
  rm -rf "$N/kubelet" "$N/containerd"
  # kubelet's fixed directories: those this node made go; in others, what
  # kubelet left of this node's pods (sockets, checkpoint, logs).
  local d
  while read -r d; do
    case "$d" in /var/lib/kubelet | /var/log/pods | /var/log/containers) rm -rf "$d" ;; esac
  done < <(cat "$N/made" 2>/dev/null)
  rm -f "$HOST_PLUGINS/kubelet.sock" "$HOST_PLUGINS/kubelet_internal_checkpoint"
  # The logs of this node's pods, deleted pods' included: whatever appeared
  # there since the start (no other kubelet runs meanwhile: start refuses).
  if [ -d /var/log/pods ] && [ -f "$N/name" ]; then
    find /var/log/pods /var/log/containers -mindepth 1 -maxdepth 1 -newer "$N/name" \
      -exec rm -rf {} + 2>/dev/null || true
  fi
  # Links in /var/log/containers to the logs just removed.
  if [ -d /var/log/containers ]; then find /var/log/containers -maxdepth 1 -xtype l -delete; fi
  # The shims' fixed directories (sockets, FIFOs, runc state), as far as
  # they are empty: another containerd on the machine may use them.
  [ -d /run/containerd ] && find /run/containerd -depth -type d -empty -delete 2>/dev/null
  log "stopped (logs kept in $LOGS)"
}

env_lines() {
  [ -f "$N/name" ] || die "not started"
  cat <<EOF
export HAMI_E2E_NODE_NAME=$(cat "$N/name")
export HAMI_E2E_NODE_DIR=$N
export HAMI_E2E_KUBELET_ROOT=$N/kubelet
export HAMI_E2E_DEVICE_PLUGIN_DIR=$HOST_PLUGINS
export HAMI_E2E_CONTAINERD=$N/containerd.sock
EOF
}

# The image a pod runs CUDA clients from: the test's cuda-client on the
# simulated driver, which reads its GPUs from SIMGPU_* in the pod's env.
# libvgpu.so comes from the device plugin's mounts, as in production.
client_image() {
  local build=${1:-}
  [ -x "$build/tests/vgpu/cuda-client" ] || die "no $build/tests/vgpu/cuda-client: build the release preset first"
  live_pid "$PIDS/containerd.pid" >/dev/null || die "the node is not running"
  local sim=$build/tests/support/simgpu/lib args=() f a
  args+=(--file "$build/tests/vgpu/cuda-client:/bin/cuda-client")
  args+=("${BUSYBOX[@]}")
  for f in libcuda.so.1 libnvidia-ml.so.1 libsimgpu_core.so libnext_cuda.so; do
    args+=(--file "$sim/$f:/usr/lib/hami-sim/$f")
  done
  args+=(--link libcuda.so.1:/usr/lib/hami-sim/libcuda.so --link libnvidia-ml.so.1:/usr/lib/hami-sim/libnvidia-ml.so)
  # The C and C++ runtime the client and libvgpu.so link against, from this machine.
  for f in $(ldd "$build/tests/vgpu/cuda-client" "$sim/libcuda.so.1" | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}' | sort -u | grep -E '^/(lib|lib64|usr/lib)/'); do
    args+=(--file "$f:$f")
  done
  python3 "$REPO/tests/e2e/node/make_image.py" hami-e2e/cuda-client:1 "$N/cuda-client.tar" \
    "${args[@]}" --env LD_LIBRARY_PATH=/usr/lib/hami-sim --cmd /bin/sh
  CTR images import "$N/cuda-client.tar" >/dev/null
  log "imported hami-e2e/cuda-client:1"
}

case "${1:-}" in
start) start "${2:-}" ;;
client-image) client_image "${2:-}" ;;
stop) stop ;;
restart-kubelet) restart_kubelet ;;
status) status ;;
env) env_lines ;;
-h | --help) usage ;;
*) usage 2 ;;
esac
