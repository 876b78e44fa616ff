#!/usr/bin/env bash
# A network namespace with no way off the machine, for the end-to-end suite's
# real node: only loopback, and the bridges and veth pairs the suite makes
# inside it. Whatever runs there (etcd, the API server, kube-scheduler,
# kubelet, containerd, the pods, our daemons) can reach only itself, so a
# stray connection (kubelet 1.20's cloud metadata probe, a DNS lookup of a
# node name) fails inside the machine instead of leaving it.
#
#   tests/e2e/netns.sh run CMD [ARG...]   run CMD in the namespace (made if missing)
#   tests/e2e/netns.sh check              exit 1 unless nothing in it leads out
#   tests/e2e/netns.sh delete             remove the namespace
#
# HAMI_E2E_NETNS   the namespace's name (default hami-e2e)
set -euo pipefail

NS=${HAMI_E2E_NETNS:-hami-e2e}

log() { printf 'netns: %s\n' "$*" >&2; }

ensure() {
  [ "$(id -u)" -eq 0 ] || { log "needs root"; exit 1; }
  if ! ip netns list | awk '{print $1}' | grep -qx "$NS"; then
    ip netns add "$NS"
    ip -n "$NS" link set lo up
  fi
}

# Nothing leads out: every interface is loopback, a bridge, or a veth whose
# peer is in this namespace too (a pod's, from the CNI bridge plugin, has its
# peer in the pod's namespace, which has no other interface); no route
# names a gateway outside the bridges' subnets.
check() {
  ensure
  local bad=0 name kind
  while read -r name kind; do
    case "$kind" in
    loopback | bridge | veth) ;;
    *)
      log "interface $name ($kind) may lead off the machine"
      bad=1
      ;;
    esac
  done < <(ip -n "$NS" -d -o link show | awk '{
      name = $2; sub(/:$/, "", name); sub(/@.*/, "", name)
      kind = ($0 ~ /link\/loopback/) ? "loopback" : "other"
      if ($0 ~ / bridge /) kind = "bridge"
      if ($0 ~ / veth /) kind = "veth"
      print name, kind }')
  if ip -n "$NS" route show default | grep -q .; then
    log "a default route: $(ip -n "$NS" route show default)"
    bad=1
  fi
  if ip -n "$NS" -6 route show default 2>/dev/null | grep -q .; then
    log "an IPv6 default route"
    bad=1
  fi
  [ $bad -eq 0 ] && log "$NS: loopback and bridges only, no default route"
  return $bad
}

case "${1:-}" in
run)
  shift
  [ $# -gt 0 ] || { log "run needs a command"; exit 2; }
  ensure
  check
  # nsenter, not `ip netns exec`: that one also makes a mount namespace and
  # remounts /sys, which hides the cgroup hierarchies kubelet and runc need.
  exec nsenter --net="/run/netns/$NS" "$@"
  ;;
check) check ;;
delete) ip netns del "$NS" 2>/dev/null || true ;;
-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' ;;
*)
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
