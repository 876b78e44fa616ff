# shellcheck shell=bash
# The real node's pod start-up figure (sourced by node_scenarios.sh
# --bench-pods, which has started the cluster, the plugin and the scheduler
# and defines K, log, GPU and N).
#
#   bench_pods COUNT FILE
#
# COUNT GPU pods of 100 MiB each (cuda-client image, sleeping) are sent in one
# `kubectl create` of a List; a watch stamps each pod's first Running as it
# arrives. create-to-Running is measured from just before that create call, so
# it holds the webhook, kube-scheduler with our extender, the bind, kubelet's
# Allocate on our plugin and the sandbox and container start in containerd.

bench_pods() {
  local count=$1 out=$2 i
  local list=$N/bench-pods.yaml watch=$N/bench-watch.txt
  {
    echo "apiVersion: v1"
    echo "kind: List"
    echo "items:"
    for i in $(seq -w 1 "$count"); do
      cat <<EOF
- apiVersion: v1
  kind: Pod
  metadata: {name: bench-$i, namespace: default, labels: {hami-e2e-bench: "1"}}
  spec:
    restartPolicy: Never
    dnsPolicy: Default
    terminationGracePeriodSeconds: 1
    containers:
    - name: main
      image: hami-e2e/cuda-client:1
      imagePullPolicy: Never
      command: [/bin/sleep, "600"]
      resources:
        limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 100}
EOF
    done
  } >"$list"

  # Every change of the pods' phase, stamped when kubectl prints it.
  (K get pods -l hami-e2e-bench=1 --watch --no-headers \
    -o custom-columns=NAME:.metadata.name,PHASE:.status.phase 2>/dev/null |
    while read -r name phase; do echo "$(date +%s.%N) $name $phase"; done >"$watch") &
  local watcher=$!
  sleep 2 # the watch is established before the first pod exists
  local t0
  t0=$(date +%s.%N)
  K create -f "$list" >/dev/null || {
    log "bench: creating the pods failed"
    kill "$watcher" 2>/dev/null
    return 1
  }
  local t_created running
  t_created=$(date +%s.%N)
  for _ in $(seq 1 600); do
    running=$(awk '$3 == "Running" {print $2}' "$watch" | sort -u | wc -l)
    [ "$running" -ge "$count" ] && break
    sleep 0.5
  done
  # The watch pipeline: kubectl (in the namespace) and the stamping loop.
  pkill -P "$watcher" 2>/dev/null
  kill "$watcher" 2>/dev/null
  wait "$watcher" 2>/dev/null

  local times
  times=$(awk -v t0="$t0" '$3 == "Running" && !seen[$2]++ {printf "%.2f\n", $1 - t0}' "$watch" | sort -n)
  running=$(grep -c . <<<"$times")
  if [ "$running" -lt "$count" ]; then
    log "bench: only $running of $count pods reached Running in 300 s"
    K get pods -l hami-e2e-bench=1 --no-headers | awk '$3 != "Running"' | head >&2
    return 1
  fi
  local p50 p99 first last
  p50=$(awk -v n="$count" 'NR == int((n + 1) / 2) {print}' <<<"$times")
  p99=$(awk -v n="$count" 'BEGIN {k = int(n * 0.99 + 0.999999)} NR == k {print}' <<<"$times")
  first=$(head -1 <<<"$times")
  last=$(tail -1 <<<"$times")
  local create_s
  create_s=$(awk -v a="$t0" -v b="$t_created" 'BEGIN {printf "%.2f", b - a}')
  {
    echo "# tests/e2e/node_scenarios.sh --bench-pods $count"
    echo "# $count GPU pods (nvidia.com/gpu 1, gpumem 100 each, one simulated 16 GiB GPU,"
    echo "# --device-split-count $count) sent in one kubectl create of a List; each pod's"
    echo "# create-to-Running measured from just before that call to the watch event"
    echo "# in which kubectl saw it Running (resolution: the watch's delivery)."
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)),"\
      "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo),"\
      "$(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), no GPU"
    echo "node: kubelet $("$BIN/kubelet" --version 2>/dev/null | awk '{print $2}'),"\
      "containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR == 1 {print $3}'),"\
      "cgroupfs, CNI bridge; control plane etcd + kube-apiserver + kube-scheduler 1.20.2 on the same machine"
    echo "pods: $count"
    echo "create call (all $count POSTs through the webhook): ${create_s} s"
    echo "create-to-Running p50: ${p50} s"
    echo "create-to-Running p99: ${p99} s"
    echo "first Running: ${first} s, last Running: ${last} s"
    echo "binds refused for node lock contention (hami-scheduler's log): $(grep -c "node lock contention" "$N/logs/hami-scheduler.log")"
    echo "each pod, sorted (s): $(tr '\n' ' ' <<<"$times")"
  } >"$out"
  cat "$out"
  K delete pods -l hami-e2e-bench=1 --wait=false >/dev/null
}
