# Process bookkeeping shared by control-plane.sh and node.sh (sourced, not
# run): daemons started in sessions of their own with a PID file and a log
# each, health polled, stopped by PID. The caller sets D (state directory),
# PIDS, LOGS and defines log and die.
#
#   source "$HERE/processes.sh"
#   spawn etcd etcd --data-dir "$D/etcd"; wait_for etcd 30 curl -sf "$url/health"
#   stop_one "$PIDS/etcd.pid"

# A port nothing listens on. Another process may take it before we bind; the
# process then fails to start and the health check says so. Chosen below the
# kernel's ephemeral range, where every outgoing connection of every process
# on the machine takes its local port: a daemon of ours found its port held
# by one there ("Address already in use") while other suites ran.
free_port() {
  local p lo base=20000 span=30000
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=0
  if [ "$lo" -gt $((base + 2000)) ]; then span=$((lo - base)); fi
  for _ in $(seq 1 200); do
    p=$((base + RANDOM % span))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      if ! grep -qs "^$p$" "$D/ports.used"; then
        echo "$p" >>"$D/ports.used"
        echo "$p"
        return
      fi
    fi
  done
  die "no free port found"
}

# Started in its own session so that a signal to the caller's process group
# (a CI step cancelled) does not race with `stop`, which kills it by PID.
spawn() {
  local name=$1
  shift
  setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
  local pid=$! comm
  echo $pid >"$PIDS/$name.pid"
  # Until the command is exec'd (through setsid, and env or nsenter when the
  # caller used them), /proc/PID/comm names a launcher, and live_pid would
  # take the process for an unrelated one.
  for _ in $(seq 1 250); do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || echo gone)
    case "$comm" in
    bash | setsid | env | nsenter | netns.sh) sleep 0.02 ;;
    *) break ;;
    esac
  done
}

# The PID in a pid file, if that process still runs what the file says: the
# binary recorded after the PID (the tests write "PID EXE"), else the
# command the file is named for (comm holds its first 15 bytes). A PID
# reused by an unrelated process is left alone.
live_pid() {
  local f=$1 pid exe name
  [ -f "$f" ] || return 1
  read -r pid exe <"$f" || true
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  if [ -n "${exe:-}" ]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$exe" || return 1
  else
    name=$(basename "$f" .pid)
    [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = "${name:0:15}" ] || return 1
  fi
  echo "$pid"
}

tail_log() {
  log "last lines of $LOGS/$1.log:"
  tail -n 25 "$LOGS/$1.log" >&2 || true
}

# wait_for NAME SECONDS CMD...: polls CMD until it succeeds; fails with NAME's
# log tail when NAME died or the deadline passed.
wait_for() {
  local name=$1 secs=$2
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ! live_pid "$PIDS/$name.pid" >/dev/null; then
      tail_log "$name"
      die "$name exited during start-up"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail_log "$name"
      die "$name not healthy after ${secs}s"
    fi
    sleep 0.2
  done
}

# stop_one PIDFILE [GRACE]: SIGTERM, SIGKILL after GRACE seconds (5).
stop_one() {
  local f=$1 grace=${2:-5} pid
  pid=$(live_pid "$f") || {
    rm -f "$f"
    return 0
  }
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((grace * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$(basename "$f" .pid) ($pid) ignored SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# One line per pid file: running (PID) or not running; 1 if any is not.
status() {
  local f pid rc=0
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    if pid=$(live_pid "$f"); then
      echo "$(basename "$f" .pid): running ($pid)"
    else
      echo "$(basename "$f" .pid): not running"
      rc=1
    fi
  done
  return $rc
}
