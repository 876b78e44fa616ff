#!/usr/bin/env bash
# switch-phases against a real state file: it waits for the file, writes each
# value through the node agent's StateWriter (read back with `vgpu inspect`),
# logs one line per change, and refuses bad steps.
#   switch_phases_test.sh SWITCH_PHASES SAMPLE_STATE_FILE VGPU
set -euo pipefail
sp=$1 sample=$2 vgpu=$3
work=$(mktemp -d)
trap 'kill "${holder:-}" 2>/dev/null || true; wait; rm -rf "$work"' EXIT
cache=$work/c.cache

switch_now() { "$vgpu" inspect --json "$cache" | sed -n 's/.*"utilization_switch": *\([0-9-]*\).*/\1/p'; }

# Started before the file exists: it must wait for it.
"$sp" "$cache" 0:1.5 1:0 > "$work/log" &
sp_pid=$!
sleep 0.2
"$sample" "$cache" --ready-file "$work/ready" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.05; done
sleep 0.3
[ "$(switch_now)" = 0 ] || { echo "switch not cleared: $(switch_now)"; exit 1; }
wait "$sp_pid"
[ "$(switch_now)" = 1 ] || { echo "switch not set: $(switch_now)"; exit 1; }
[ "$(grep -c '"switch": ' "$work/log")" = 2 ] || { cat "$work/log"; exit 1; }
t0=$(sed -n '1s/.*"t_ns": \([0-9]*\).*/\1/p' "$work/log")
t1=$(sed -n '2s/.*"t_ns": \([0-9]*\).*/\1/p' "$work/log")
(( t1 - t0 >= 1500000000 )) || { echo "held $((t1 - t0)) ns, want >= 1.5 s"; exit 1; }

# Bad input: a clear error and exit status 2, the file untouched.
for bad in 2:1 0:-1 0:x 0 :1; do
  if "$sp" "$cache" "$bad" 2>"$work/err"; then echo "accepted $bad"; exit 1; fi
  grep -q "bad step" "$work/err" || { cat "$work/err"; exit 1; }
done
[ "$(switch_now)" = 1 ]
if "$sp" "$cache" 2>/dev/null; then echo "accepted no steps"; exit 1; fi
"$sp" --help | grep -q "usage: switch-phases" || { echo "--help"; exit 1; }
echo "switch-phases: ok"
