#!/usr/bin/env bash
# The main job, for now: build, write a sample state file with the project's own
# region library (three worker processes claim slots; one is SIGKILLed), and show
# it with `vgpu inspect`, as text and as JSON; then stop the workers and look again.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target vgpu sample-state-file

bin=build/release
work=$(mktemp -d)
file="$work/demo.cache"
cleanup() {
  [ -n "${writer:-}" ] && kill "$writer" 2>/dev/null && wait "$writer" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/tools/sample-state-file" "$file" --ready-file "$work/ready" &
writer=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
[ -e "$work/ready" ] || { echo "demo: the sample writer did not start" >&2; exit 1; }

echo
echo "\$ vgpu inspect $file"
"$bin/src/vgpu" inspect "$file"
echo
echo "\$ vgpu inspect --json $file   (first 40 lines)"
"$bin/src/vgpu" inspect --json "$file" | sed -n '1,40p'

kill "$writer"; wait "$writer" || true; writer=
echo
echo "Workers stopped. Live owners released their slots; the SIGKILLed one is marked dead until a sweep:"
echo "\$ vgpu inspect $file"
"$bin/src/vgpu" inspect "$file"
