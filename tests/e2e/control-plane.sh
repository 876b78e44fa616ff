#!/usr/bin/env bash
# A loopback-only Kubernetes 1.20 control plane for the end-to-end tests and
# for debugging by hand: etcd, kube-apiserver (certificates, token file, RBAC)
# and kube-scheduler with our extender and webhook registered. No
# controller-manager and no kubelet: nodes are published by the tests (or by
# `add-node`), and kubelet's device-plugin side is the test's harness.
#
#   tests/e2e/control-plane.sh start      start everything, print the env file
#   tests/e2e/control-plane.sh stop       stop every process it (or a test) started
#   tests/e2e/control-plane.sh env        print `export ...` lines for the shell
#   tests/e2e/control-plane.sh status     which processes are alive
#   tests/e2e/control-plane.sh add-node NAME [GPUS]   a Node as kubelet publishes it
#   tests/e2e/control-plane.sh restart-scheduler   kube-scheduler again, with the
#                                                   client limits below as they are now
#
# HAMI_E2E_DIR     state directory: certificates, kubeconfigs, logs, PID files
#                  (default /tmp/hami-e2e)
# HAMI_E2E_BIN     directory with kube-apiserver, kube-scheduler and kubectl
#                  (default: the cache of tests/e2e/build-k8s.sh)
# HAMI_E2E_EXTENDER_PORT   where hami-scheduler will listen (default: a free port)
# HAMI_E2E_SCHEDULER_QPS, HAMI_E2E_SCHEDULER_BURST   kube-scheduler's client
#                  limits (clientConnection qps/burst; default: its own, 50/100)
# HAMI_E2E_CHART=1 a cluster for our Helm chart instead (tests/e2e/chart.sh;
#                  inside tests/e2e/netns.sh only): no extender, webhook or
#                  RBAC of ours; ServiceAccount tokens; kube-controller-manager
#                  (Deployments, DaemonSets, Endpoints, tokens, garbage
#                  collection); the API server on port 443 of every address,
#                  10.0.0.1 (the `kubernetes` Service's) added to loopback so
#                  pods reach it without kube-proxy, and webhooks called at
#                  their Service's endpoints (--enable-aggregator-routing)
#
# hami-scheduler itself is not started here: the tests start, kill and restart
# it. By hand, start it with the line `start` prints.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
D=${HAMI_E2E_DIR:-/tmp/hami-e2e}
BIN=${HAMI_E2E_BIN:-$("$HERE/build-k8s.sh" --print)}
PIDS=$D/pids
LOGS=$D/logs
PKI=$D/pki
CHART=${HAMI_E2E_CHART:-0}

log() { printf 'control-plane: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}

usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; }

# free_port, spawn, live_pid, wait_for, stop_one, status.
# shellcheck source=tests/e2e/processes.sh
source "$HERE/processes.sh"

gen_certs() {
  mkdir -p "$PKI"
  cd "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
    -subj "/CN=hami-e2e-ca" 2>/dev/null
  local name san
  for name in apiserver hami; do
    san="IP:127.0.0.1,DNS:localhost"
    [ $name = apiserver ] && san="$san,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    # ECDSA P-256: kube-scheduler's and the API server's HTTP/1.1 clients
    # keep at most two idle connections to our server, so it makes a TLS
    # handshake every few requests, and an RSA-2048 signature per handshake
    # costs it ~20 times what a P-256 one does.
    local key=(-newkey rsa:2048)
    [ $name = hami ] && key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)
    openssl req "${key[@]}" -nodes -keyout $name.key -out $name.csr \
      -subj "/CN=$name" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >$name.ext
    openssl x509 -req -in $name.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out $name.crt -days 2 -extfile $name.ext 2>/dev/null
  done
  # kube-scheduler's client certificate for the extender, from a CA of its
  # own (as the chart makes it): hami-scheduler --client-ca-file trusts it.
  openssl req -x509 -newkey rsa:2048 -nodes -keyout client-ca.key -out client-ca.crt -days 2 \
    -subj "/CN=hami-e2e-client-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout kube-scheduler-client.key \
    -out kube-scheduler-client.csr -subj "/CN=hami-kube-scheduler" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >kube-scheduler-client.ext
  openssl x509 -req -in kube-scheduler-client.csr -CA client-ca.crt -CAkey client-ca.key \
    -CAcreateserial -out kube-scheduler-client.crt -days 2 -extfile kube-scheduler-client.ext 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  cd - >/dev/null
}

kubeconfig() {
  local file=$1 user=$2 token=$3
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $user
  user:
    token: $token
contexts:
- name: e2e
  context: {cluster: e2e, user: $user}
current-context: e2e
EOF
}

KUBECTL() { "$BIN/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@"; }

# Our components run as their own users with the permissions upstream's chart
# grants them, so a missing permission fails here as in a cluster.
apply_rbac_and_webhook() {
  local ca_b64
  ca_b64=$(base64 -w0 <"$PKI/ca.crt")
  KUBECTL apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hami-scheduler}
rules:
- {apiGroups: [""], resources: [pods, configmaps], verbs: [get, list, watch, patch]}
- {apiGroups: [""], resources: [pods/binding], verbs: [create]}
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch, patch]}
- {apiGroups: [""], resources: [events], verbs: [create, get, list, patch]}
- {apiGroups: [""], resources: [resourcequotas], verbs: [get, list, watch]}
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create, list, watch, get, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: hami-scheduler}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hami-scheduler}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: hami-scheduler}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hami-device-plugin}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, create, watch, list, update, patch]}
- {apiGroups: [""], resources: [nodes], verbs: [get, update, list, patch]}
- {apiGroups: [""], resources: [events], verbs: [list, create, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: hami-device-plugin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hami-device-plugin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: hami-device-plugin}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: hami-webhook}
webhooks:
- name: vgpu.hami.io
  admissionReviewVersions: [v1, v1beta1]
  clientConfig:
    url: https://127.0.0.1:$EXTENDER_PORT/webhook
    caBundle: $ca_b64
  rules:
  - {operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}
  # Fail, not upstream's Ignore: a webhook that cannot be reached must show
  # up as a failed creation, not as a pod silently left to default-scheduler.
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 10
  reinvocationPolicy: Never
  objectSelector:
    matchExpressions: [{key: hami.io/webhook, operator: NotIn, values: [ignore]}]
---
# As the chart: every pod UPDATE, whatever the pod's labels, so only our
# scheduler and device plugin (--decision-writers) change the decision
# annotations.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: hami-decisions}
webhooks:
- name: decisions.hami.io
  admissionReviewVersions: [v1, v1beta1]
  clientConfig:
    url: https://127.0.0.1:$EXTENDER_PORT/webhook
    caBundle: $ca_b64
  rules:
  - {operations: [UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 10
EOF
}

write_scheduler_config() {
  local limits=""
  [ -n "${HAMI_E2E_SCHEDULER_QPS:-}" ] && limits+=$'\n'"  qps: $HAMI_E2E_SCHEDULER_QPS"
  [ -n "${HAMI_E2E_SCHEDULER_BURST:-}" ] && limits+=$'\n'"  burst: $HAMI_E2E_SCHEDULER_BURST"
  cat >"$D/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1beta1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $D/kube-scheduler.kubeconfig$limits
# With --config the --address/--port flags are ignored; these are the
# insecure health and metrics listeners, on loopback.
healthzBindAddress: 127.0.0.1:$SCHEDULER_PORT
metricsBindAddress: 127.0.0.1:$SCHEDULER_PORT
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
EOF
  # With the chart, its own kube-scheduler runs the hami-scheduler profile.
  [ "$CHART" = 1 ] && return 0
  cat >>"$D/kube-scheduler.yaml" <<EOF
- schedulerName: hami-scheduler
extenders:
- urlPrefix: https://127.0.0.1:$EXTENDER_PORT
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  weight: 1
  enableHTTPS: true
  tlsConfig:
    caFile: $PKI/ca.crt
    certFile: $PKI/kube-scheduler-client.crt
    keyFile: $PKI/kube-scheduler-client.key
  nodeCacheCapable: true
  httpTimeout: 30s
  managedResources:
  - {name: nvidia.com/gpu, ignoredByScheduler: true}
  - {name: nvidia.com/gpumem, ignoredByScheduler: true}
  - {name: nvidia.com/gpumem-percentage, ignoredByScheduler: true}
  - {name: nvidia.com/gpucores, ignoredByScheduler: true}
  - {name: nvidia.com/priority, ignoredByScheduler: true}
EOF
}

start() {
  local want=(kube-apiserver kube-scheduler kubectl)
  [ "$CHART" = 1 ] && want+=(kube-controller-manager)
  for b in "${want[@]}"; do
    [ -x "$BIN/$b" ] || die "$BIN/$b missing: run tests/e2e/build-k8s.sh first (see its --help)"
  done
  command -v etcd >/dev/null || die "etcd missing: run tests/e2e/build-k8s.sh first"
  if [ -d "$PIDS" ]; then
    for f in "$PIDS"/*.pid; do
      [ -e "$f" ] || continue
      live_pid "$f" >/dev/null && die "already running ($f); run '$0 stop' first"
    done
  fi
  # Only a directory this script made is emptied (HAMI_E2E_DIR may be mistyped).
  if [ -d "$D" ] && [ -n "$(ls -A "$D")" ] && [ ! -f "$D/.hami-e2e" ]; then
    die "$D exists and was not made by $0; choose another HAMI_E2E_DIR"
  fi
  rm -rf "$D"
  mkdir -p "$D" "$PIDS" "$LOGS"
  touch "$D/.hami-e2e"
  : >"$D/ports.used"

  ETCD_PORT=$(free_port)
  ETCD_PEER_PORT=$(free_port)
  APISERVER_PORT=$(free_port)
  local bind=127.0.0.1 chart_flags=(--disable-admission-plugins=ServiceAccount)
  if [ "$CHART" = 1 ]; then
    # In-cluster clients dial KUBERNETES_SERVICE_HOST:443 = 10.0.0.1:443.
    APISERVER_PORT=443 bind=0.0.0.0
    chart_flags=(--enable-aggregator-routing=true)
    ip addr show dev lo | grep -qF ' 10.0.0.1/' || ip addr add 10.0.0.1/32 dev lo
  fi
  SCHEDULER_PORT=$(free_port)
  EXTENDER_PORT=${HAMI_E2E_EXTENDER_PORT:-$(free_port)}
  METRICS_PORT=$(free_port)

  gen_certs
  local admin_token scheduler_token hami_token dp_token
  admin_token=$(openssl rand -hex 16)
  scheduler_token=$(openssl rand -hex 16)
  hami_token=$(openssl rand -hex 16)
  dp_token=$(openssl rand -hex 16)
  cat >"$D/tokens.csv" <<EOF
$admin_token,admin,admin,system:masters
$scheduler_token,system:kube-scheduler,system:kube-scheduler
$hami_token,hami-scheduler,hami-scheduler
$dp_token,hami-device-plugin,hami-device-plugin
EOF
  kubeconfig "$D/admin.kubeconfig" admin "$admin_token"
  kubeconfig "$D/kube-scheduler.kubeconfig" system:kube-scheduler "$scheduler_token"
  kubeconfig "$D/hami-scheduler.kubeconfig" hami-scheduler "$hami_token"
  kubeconfig "$D/hami-device-plugin.kubeconfig" hami-device-plugin "$dp_token"
  # The key our scheduler signs its decisions with and the plugins check.
  openssl rand -hex 32 >"$D/decision.key"

  log "etcd on 127.0.0.1:$ETCD_PORT"
  spawn etcd etcd --name e2e --data-dir "$D/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT"
  wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

  log "kube-apiserver on https://127.0.0.1:$APISERVER_PORT"
  # ServiceAccount admission waits for the token controller (part of the
  # controller-manager, which runs only with the chart); nothing else here
  # needs tokens.
  spawn kube-apiserver "$BIN/kube-apiserver" \
    --bind-address=$bind --advertise-address=127.0.0.1 \
    --secure-port="$APISERVER_PORT" --insecure-port=0 \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --token-auth-file="$D/tokens.csv" \
    --authorization-mode=Node,RBAC \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-cluster-ip-range=10.0.0.0/24 \
    --endpoint-reconciler-type=none \
    "${chart_flags[@]}" \
    --allow-privileged=true \
    --event-ttl=1h \
    --kubelet-preferred-address-types=InternalIP \
    --profiling=false
  wait_for kube-apiserver 90 curl -sf --cacert "$PKI/ca.crt" \
    -H "Authorization: Bearer $admin_token" "https://127.0.0.1:$APISERVER_PORT/readyz"
  wait_for kube-apiserver 30 KUBECTL get namespace default

  if [ "$CHART" = 1 ]; then start_controller_manager; else apply_rbac_and_webhook; fi
  cat >"$D/ports" <<EOF
APISERVER_PORT=$APISERVER_PORT
SCHEDULER_PORT=$SCHEDULER_PORT
EXTENDER_PORT=$EXTENDER_PORT
EOF
  start_scheduler

  cat >"$D/env" <<EOF
export HAMI_E2E_DIR=$D
export KUBECONFIG=$D/admin.kubeconfig
export HAMI_E2E_KUBECONFIG=$D/admin.kubeconfig
export HAMI_E2E_SCHEDULER_KUBECONFIG=$D/hami-scheduler.kubeconfig
export HAMI_E2E_DEVICE_PLUGIN_KUBECONFIG=$D/hami-device-plugin.kubeconfig
export HAMI_E2E_EXTENDER_PORT=$EXTENDER_PORT
export HAMI_E2E_METRICS_PORT=$METRICS_PORT
export HAMI_E2E_KUBE_SCHEDULER_PORT=$SCHEDULER_PORT
export HAMI_E2E_CA=$PKI/ca.crt
export HAMI_E2E_CERT=$PKI/hami.crt
export HAMI_E2E_KEY=$PKI/hami.key
export HAMI_E2E_CLIENT_CA=$PKI/client-ca.crt
export HAMI_E2E_DECISION_KEY=$D/decision.key
export HAMI_E2E_APISERVER=https://127.0.0.1:$APISERVER_PORT
export HAMI_E2E_KUBECTL=$BIN/kubectl
export PATH=$BIN:\$PATH
EOF
  log "ready; state in $D, logs in $LOGS"
  log "hami-scheduler is expected on 127.0.0.1:$EXTENDER_PORT, e.g.:"
  log "  build/e2e/src/hami-scheduler --kubeconfig=$D/hami-scheduler.kubeconfig --http_bind=127.0.0.1:$EXTENDER_PORT --cert_file=$PKI/hami.crt --key_file=$PKI/hami.key --client-ca-file=$PKI/client-ca.crt --metrics-bind-address=127.0.0.1:$METRICS_PORT --decision-key-file=$D/decision.key --decision-writers=hami-scheduler,hami-device-plugin"
  cat "$D/env"
}

# The controllers the chart's workloads need, as the admin (this cluster has
# no kube-controller-manager user); health on loopback, plain HTTP.
start_controller_manager() {
  local port
  port=$(free_port)
  log "kube-controller-manager (health on http://127.0.0.1:$port/healthz)"
  spawn kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$D/admin.kubeconfig" --leader-elect=false \
    --controllers=deployment,replicaset,daemonset,endpoint,serviceaccount,serviceaccount-token,garbagecollector \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --address=127.0.0.1 --port="$port" --secure-port=0 -v=1
  wait_for kube-controller-manager 60 curl -sf "http://127.0.0.1:$port/healthz"
}

start_scheduler() {
  write_scheduler_config
  log "kube-scheduler (health on http://127.0.0.1:$SCHEDULER_PORT/healthz)"
  # Plain HTTP health on loopback only; the secure port would need the
  # controller-manager's authentication delegation set up.
  spawn kube-scheduler "$BIN/kube-scheduler" --config="$D/kube-scheduler.yaml" \
    --secure-port=0 -v=2
  wait_for kube-scheduler 60 curl -sf "http://127.0.0.1:$SCHEDULER_PORT/healthz"
}

restart_scheduler() {
  [ -f "$D/ports" ] || die "not started"
  # shellcheck disable=SC1091
  source "$D/ports"
  stop_one "$PIDS/kube-scheduler.pid"
  start_scheduler
}

stop() {
  [ -d "$PIDS" ] || return 0
  local f names=()
  # What the tests started first (they may have died before cleaning up), then
  # the control plane from the top down.
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    case "$(basename "$f" .pid)" in
    etcd | kube-apiserver | kube-scheduler | kube-controller-manager) ;;
    *) names+=("$f") ;;
    esac
  done
  names+=("$PIDS/kube-controller-manager.pid" "$PIDS/kube-scheduler.pid" "$PIDS/kube-apiserver.pid" "$PIDS/etcd.pid")
  for f in "${names[@]}"; do
    stop_one "$f"
  done
  log "stopped (logs kept in $LOGS)"
}

# A node as kubelet publishes it: capacity and allocatable in its status,
# Ready. The TaintNodesByCondition admission plugin gives every new node the
# not-ready taint, which the node lifecycle controller would lift once kubelet
# reports Ready; no controller runs here, so it is lifted by hand.
add_node() {
  local name=$1 gpus=${2:-0}
  [ -f "$D/env" ] || die "not started"
  KUBECTL create -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {kubernetes.io/hostname: $name, kubernetes.io/os: linux, gpu: "on"}
EOF
  local token
  token=$(awk -F, '$2 == "admin" {print $1}' "$D/tokens.csv")
  local api
  api=$(awk -F= '/HAMI_E2E_APISERVER/ {print $2}' "$D/env")
  curl -sf --cacert "$PKI/ca.crt" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/merge-patch+json' -X PATCH \
    "$api/api/v1/nodes/$name/status" -d @- >/dev/null <<EOF
{"status": {
  "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "$gpus"},
  "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "$gpus"},
  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "kubelet is posting ready status",
                  "lastHeartbeatTime": "$(date -u +%FT%TZ)",
                  "lastTransitionTime": "$(date -u +%FT%TZ)"}]}}
EOF
  KUBECTL patch node "$name" --type=merge -p '{"spec":{"taints":null}}' >/dev/null
  log "node $name added"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env) cat "$D/env" ;;
status) status ;;
restart-scheduler) restart_scheduler ;;
add-node)
  shift
  [ $# -ge 1 ] || die "add-node NAME [GPUS]"
  add_node "$@"
  ;;
-h | --help | help) usage ;;
*)
  usage >&2
  exit 2
  ;;
esac
