#!/usr/bin/env bash
# End-to-end scheduling benchmark on the real control plane of tests/e2e/
# (etcd, kube-apiserver, kube-scheduler 1.20): N fake GPU nodes (8 H200
# each, registered as our device plugin registers them, no kubelet), P pods
# created at once, until every pod is bound. Each size and client-limit
# setting runs twice in the same control plane: kube-scheduler alone with a
# plain extended resource (example.com/gpu, no webhook call), then GPU pods
# through our webhook and extender (nvidia.com/gpu 1, gpumem 20000,
# gpucores 25: four per GPU) with a stand-in making the device plugin's
# requests after Allocate. Prints pods/s, pod latency (creation request to
# bound, seen through a watch), each process's CPU seconds, kube-scheduler's
# scheduling attempts and the extender's calls.
#
#   bench/scheduler/e2e.sh                 the whole matrix, written to
#                                          bench/results/scheduler-e2e-build-machine.txt
#   SIZES=500:2000 LIMITS=default bench/scheduler/e2e.sh   a part, to stdout only
#
# SIZES    "NODES:PODS ..." (default "500:2000 2000:4000")
# LIMITS   "default raised" (default both): kube-scheduler's client limits,
#          its defaults (qps 50, burst 100) or RAISED_QPS/RAISED_BURST
#          (default 1000/2000)
# ROUNDS   plain/ours pairs per setting (default 1)
# MODES    "plain ours" (default); one of them alone for a diagnosis
# PROTOCOLS  "lock match-pods" (default): ours runs with the nodes unmarked
#          (upstream's node lock) and marked hami.io/node-allocate-protocol
#          (docs/scheduler-protocol.md)
# HOLDS    "1.5 0" (default): seconds the stand-in takes from a pod seen bound
#          to its patches (a real node's Allocate, 1.2-1.7 s), per ours run
# BUILD    build directory (default build/release)
# OUT      results file (default: the one above when SIZES and LIMITS are the
#          defaults, else none)
# QUIET_WAIT     seconds to wait, before each run, for the machine to be idle
#                apart from the control plane (other builds, default 900); the
#                CPU other processes took during each run is reported either way
# HAMI_E2E_DIR   the control plane's state (default /tmp/hami-sched-bench)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

DEFAULT_SIZES="500:2000 2000:4000"
DEFAULT_LIMITS="default raised"
SIZES=${SIZES:-$DEFAULT_SIZES}
LIMITS=${LIMITS:-$DEFAULT_LIMITS}
ROUNDS=${ROUNDS:-1}
MODES=${MODES:-plain ours}
PROTOCOLS=${PROTOCOLS:-lock match-pods}
HOLDS=${HOLDS:-1.5 0}
RAISED_QPS=${RAISED_QPS:-1000}
RAISED_BURST=${RAISED_BURST:-2000}
OUT_DEFAULT=bench/results/scheduler-e2e-build-machine.txt
if [ -z "${OUT+x}" ]; then
  OUT=""
  [ "$SIZES" = "$DEFAULT_SIZES" ] && [ "$LIMITS" = "$DEFAULT_LIMITS" ] &&
    [ "$MODES" = "plain ours" ] && OUT=$OUT_DEFAULT
fi
export HAMI_E2E_DIR=${HAMI_E2E_DIR:-/tmp/hami-sched-bench}
D=$HAMI_E2E_DIR
BUILD=${BUILD:-build/release}
BENCH=$ROOT/$BUILD/bench/scheduler/scheduler-e2e-bench
SCHED=$ROOT/$BUILD/src/hami-scheduler
RAW=$(mktemp /tmp/sched-e2e-raw.XXXXXX)
REQS=$(mktemp /tmp/sched-e2e-reqs.XXXXXX)

log() { printf 'e2e-bench: %s\n' "$*" >&2; }

tests/e2e/build-k8s.sh
[ -d "$BUILD" ] || cmake --preset release -B "$BUILD" >/dev/null
cmake --build "$BUILD" -j "${JOBS:-2}" --target hami-scheduler scheduler-e2e-bench

cleanup() {
  local rc=$?
  tests/e2e/control-plane.sh stop || true
  [ $rc -ne 0 ] && log "failed; logs in $D/logs, runs so far in $RAW"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts a process of ours in the background with its pid file where
# control-plane.sh stop finds it ("<pid> <binary>").
daemon() {
  local name=$1
  shift
  "$@" >"$D/logs/$name.log" 2>&1 </dev/null &
  echo "$! $1" >"$D/pids/$name.pid"
}

# Waits (up to QUIET_WAIT s) until the machine's busy share over 3 s is below
# 25 % of one core: the control plane idles, nothing else runs.
wait_quiet() {
  local deadline=$((SECONDS + ${QUIET_WAIT:-900})) a b
  while :; do
    a=$(awk '/^cpu / {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
    sleep 3
    b=$(awk '/^cpu / {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
    if awk -v a="$a" -v b="$b" -v n="$(nproc)" 'BEGIN {split(a, x); split(b, y);
         exit !((y[1] - x[1]) / (y[2] - x[2]) * n < 0.25)}'; then
      return 0
    fi
    if [ $SECONDS -ge $deadline ]; then
      log "the machine is still busy (others' builds?); measuring anyway"
      return 0
    fi
  done
}

# The API server's request and watch-event counters, summed by what they
# count: "request VERB resource[/subresource] N" and "watch-events Kind N".
api_counters() {
  local tok
  tok=$(awk -F, '$2 == "admin" {print $1}' "$D/tokens.csv")
  curl -sf --cacert "$HAMI_E2E_CA" -H "Authorization: Bearer $tok" "$HAMI_E2E_APISERVER/metrics" |
    awk '/^apiserver_(request_total|watch_events_total)\{/ {
      split($1, nv, "{"); labels = nv[2]; sub(/\}$/, "", labels)
      n = split(labels, kv, ","); delete l
      for (i = 1; i <= n; i++) { split(kv[i], p, "="); gsub(/"/, "", p[2]); l[p[1]] = p[2] }
      if (nv[1] == "apiserver_request_total") {
        what = l["verb"] " " l["resource"] (l["subresource"] != "" ? "/" l["subresource"] : "")
        key = "request " what
      } else key = "watch-events " l["kind"]
      sum[key] += $2
    } END {for (k in sum) print k "\t" sum[k]}'
}

# What one run asked of the API server, per pod bound.
api_per_pod() {
  local before=$1 after=$2 pods=$3
  awk -F'\t' -v pods="$pods" 'NR == FNR {b[$1] = $2; next}
    {d = ($2 - b[$1]) / pods; if (d >= 0.05) printf "%-32s %6.2f\n", $1, d}' "$before" "$after" | sort
}

wait_until() {
  local what=$1 secs=$2
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && {
      log "$what: not after ${secs}s"
      return 1
    }
    sleep 0.5
  done
}

machine() {
  echo "Machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
  echo "Commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench tests ':!bench/results' || echo ' (with uncommitted changes)'), $(date -u +%F)"
  echo "Kubernetes: $("$(tests/e2e/build-k8s.sh --print)/kube-scheduler" --version 2>/dev/null), etcd $(etcd --version 2>/dev/null | awk '/etcd Version/ {print $3}')"
}

for size in $SIZES; do
  nodes=${size%:*}
  pods=${size#*:}
  unset HAMI_E2E_SCHEDULER_QPS HAMI_E2E_SCHEDULER_BURST
  tests/e2e/control-plane.sh start >/dev/null
  # shellcheck disable=SC1091
  source "$D/env"
  daemon hami-scheduler "$SCHED" --kubeconfig="$HAMI_E2E_SCHEDULER_KUBECONFIG" \
    --http_bind="127.0.0.1:$HAMI_E2E_EXTENDER_PORT" --cert_file="$HAMI_E2E_CERT" \
    --key_file="$HAMI_E2E_KEY" --metrics-bind-address="127.0.0.1:$HAMI_E2E_METRICS_PORT" \
    --decision-key-file="$HAMI_E2E_DECISION_KEY" --decision-writers=hami-scheduler,hami-device-plugin
  standin() {
    [ -f "$D/pids/standin.pid" ] && kill "$(cut -d' ' -f1 "$D/pids/standin.pid")" 2>/dev/null && sleep 0.5
    daemon standin "$BENCH" standin --kubeconfig="$HAMI_E2E_DEVICE_PLUGIN_KUBECONFIG" \
      --hold="$1" --protocol="$2"
  }
  standin 0 lock
  log "$nodes nodes"
  "$BENCH" nodes --kubeconfig="$HAMI_E2E_KUBECONFIG" --count="$nodes"
  wait_until "hami-scheduler's cache of $nodes nodes" 120 \
    bash -c "[ \"\$(curl -sf http://127.0.0.1:$HAMI_E2E_METRICS_PORT/metrics | awk '/^hami_scheduler_cached_nodes / {print \$2}')\" = $nodes ]"
  for limits in $LIMITS; do
    if [ "$limits" = raised ]; then
      export HAMI_E2E_SCHEDULER_QPS=$RAISED_QPS HAMI_E2E_SCHEDULER_BURST=$RAISED_BURST
      desc="qps $RAISED_QPS, burst $RAISED_BURST"
    else
      unset HAMI_E2E_SCHEDULER_QPS HAMI_E2E_SCHEDULER_BURST
      desc="qps 50, burst 100 (kube-scheduler's defaults)"
    fi
    tests/e2e/control-plane.sh restart-scheduler
    sleep 2 # its informers list the nodes
    # Interleaved: each round runs plain, then ours under every protocol and hold.
    runs=""
    for mode in $MODES; do
      if [ "$mode" = ours ]; then
        for protocol in $PROTOCOLS; do for hold in $HOLDS; do runs="$runs ours:$protocol:$hold"; done; done
      else
        runs="$runs $mode::"
      fi
    done
    for round in $(seq 1 "$ROUNDS"); do
      for run in $runs; do
        IFS=: read -r mode protocol hold <<<"$run"
        variant=""
        ns="$mode-$limits-$round"
        if [ "$mode" = ours ]; then
          variant="$protocol, hold $hold s"
          ns="$mode-$protocol-${hold/./}-$limits-$round"
          "$BENCH" protocol --kubeconfig="$HAMI_E2E_KUBECONFIG" "$protocol"
          standin "$hold" "$protocol"
        fi
        wait_quiet
        log "$nodes nodes, $pods pods, $desc: $mode $variant, round $round (load: $(cut -d' ' -f1-3 /proc/loadavg))"
        api_counters >"$RAW.before" || true
        "$BENCH" run --kubeconfig="$HAMI_E2E_KUBECONFIG" --mode="$mode" --pods="$pods" \
          --namespace="$ns" --label="$nodes nodes, $pods pods, $desc" ${variant:+--variant="$variant"} \
          --cpu "etcd=$D/pids/etcd.pid" --cpu "kube-apiserver=$D/pids/kube-apiserver.pid" \
          --cpu "kube-scheduler=$D/pids/kube-scheduler.pid" \
          --cpu "hami-scheduler=$D/pids/hami-scheduler.pid" --cpu "standin=$D/pids/standin.pid" \
          --scheduler-metrics="http://127.0.0.1:$HAMI_E2E_KUBE_SCHEDULER_PORT/metrics" \
          --hami-metrics="http://127.0.0.1:$HAMI_E2E_METRICS_PORT/metrics" | tee -a "$RAW"
        api_counters >"$RAW.after" || true
        {
          echo "$nodes nodes, $pods pods, $desc, $mode${variant:+, $variant}:"
          api_per_pod "$RAW.before" "$RAW.after" "$pods" | sed 's/^/  /'
        } >>"$REQS"
        "$BENCH" clean --kubeconfig="$HAMI_E2E_KUBECONFIG" --namespace="$ns"
      done
    done
  done
  tests/e2e/control-plane.sh stop
done

report() {
  echo "# End-to-end scheduling: kube-scheduler 1.20 alone and with our webhook and extender"
  echo
  machine
  echo "Command: bench/scheduler/e2e.sh (SIZES=\"$SIZES\" LIMITS=\"$LIMITS\" ROUNDS=$ROUNDS MODES=\"$MODES\" PROTOCOLS=\"$PROTOCOLS\" HOLDS=\"$HOLDS\")"
  echo
  "$BENCH" report "$RAW"
  echo
  echo "API server work per pod bound (requests by verb and resource, watch events sent by kind):"
  echo
  cat "$REQS"
  echo
  echo "Raw runs (one JSON object each):"
  echo
  cat "$RAW"
}
if [ -n "$OUT" ]; then
  report >"$OUT"
  log "results in $OUT"
  cat "$OUT"
else
  report
fi
rm -f "$RAW" "$RAW.before" "$RAW.after" "$REQS"
