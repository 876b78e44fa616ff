#!/usr/bin/env bash
# Checks that every cross-component #include in src/ is declared in CMake: a
# file in src/A/ may include "B/..." only when a target built from src/A/
# links (target_link_libraries, any scope) a target built from src/B/.
# Components are the folders of src/; a target belongs to the folder of its
# sources (a header-only INTERFACE target: hami_<folder>..., longest match).
# One line per undeclared include (FILE:LINE: what to add), exit 1 if any.
#   scripts/check-includes.sh              check this repository (run from anywhere)
#   scripts/check-includes.sh --root DIR   check the tree at DIR instead
#   scripts/check-includes.sh --graph      print each component's declared dependencies
#   scripts/check-includes.sh --self-test  build a tiny tree with an undeclared
#                                          include and assert that it is reported
# The CMake files read are src/CMakeLists.txt and src/*/*.cmake. The build runs
# this check too (target hami_include_check), so an undeclared include fails it.
set -uo pipefail

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# "component<TAB>dependency" for each declared edge of the tree at $1 (the
# components are the folder names given on stdin's first line).
edges() {
  local root=$1 comps=$2
  cat "$root/src/CMakeLists.txt" "$root"/src/*/*.cmake 2>/dev/null |
    awk -v comps="$comps" '
      BEGIN { n = split(comps, c, " "); for (i = 1; i <= n; i++) is_comp[c[i]] = 1 }
      { sub(/#.*/, ""); text = text " " $0 }
      END {
        # Each command: name(args). Arguments never hold parentheses here
        # except generator expressions, which name no sources or targets.
        while (match(text, /[A-Za-z_]+[ ]*\([^()]*(\([^()]*\)[^()]*)*\)/)) {
          cmd = substr(text, RSTART, RLENGTH)
          text = substr(text, RSTART + RLENGTH)
          name = cmd; sub(/[ ]*\(.*/, "", name)
          args = cmd; sub(/^[^(]*\(/, "", args); sub(/\)$/, "", args)
          m = split(args, a, /[ \t]+/)
          first = ""; k = 0
          for (i = 1; i <= m; i++) if (a[i] != "") { w[++k] = a[i] }
          if (k == 0) continue
          if (name == "add_library" || name == "add_executable") {
            t = w[1]; comp = ""
            for (i = 2; i <= k; i++) {
              if (match(w[i], /^[a-z0-9_]+\//)) {
                f = substr(w[i], 1, RLENGTH - 1)
                if (f in is_comp) { comp = f; break }
              }
            }
            if (comp == "") {
              best = ""
              for (f in is_comp)
                if ((t == "hami_" f || index(t, "hami_" f "_") == 1) && length(f) > length(best))
                  best = f
              comp = best
            }
            if (comp != "") owner[t] = comp
          } else if (name == "target_link_libraries") {
            for (i = 2; i <= k; i++) links[w[1]] = links[w[1]] " " w[i]
          }
        }
        for (t in links) {
          if (!(t in owner)) continue
          m = split(links[t], d, " ")
          for (i = 1; i <= m; i++)
            if ((d[i] in owner) && owner[d[i]] != owner[t]) print owner[t] "\t" owner[d[i]]
        }
      }' | sort -u
}

# Checks the tree at $1; prints one line per problem, returns 1 if any.
check_tree() {
  local root=$1 comps problems=0 declared
  [ -d "$root/src" ] || { echo "check-includes: no src/ under $root" >&2; return 2; }
  comps=$(cd "$root/src" && for d in */; do printf '%s ' "${d%/}"; done)
  declared=$(edges "$root" "$comps")
  local out
  out=$(cd "$root/src" && grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z0-9_]+/' \
    --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.def' --include='*.in' . |
    awk -v declared="$declared" '
      BEGIN {
        n = split(declared, e, "\n")
        for (i = 1; i <= n; i++) { split(e[i], p, "\t"); ok[p[1] "/" p[2]] = 1 }
      }
      {
        file = $0; sub(/^\.\//, "", file)
        split(file, parts, ":"); path = parts[1]; line = parts[2]
        comp = path; sub(/\/.*/, "", comp)
        inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
        dep = inc; sub(/\/.*/, "", dep)
        if (dep == comp) next
        if (system("test -d \"" dep "\"") != 0) next  # not a component (e.g. a generated path)
        if (!((comp "/" dep) in ok)) {
          printf "src/%s:%s: includes \"%s\" but no target of src/%s/ links one of src/%s/ " \
                 "(add it to target_link_libraries in src/CMakeLists.txt, or drop the include)\n",
                 path, line, inc, comp, dep
        }
      }')
  if [ -n "$out" ]; then
    echo "$out"
    problems=$(wc -l <<<"$out")
    echo "check-includes: $problems undeclared cross-component include(s)" >&2
    return 1
  fi
  echo "check-includes: every cross-component include in src/ is declared in CMake"
}

graph() {
  local root=$1 comps
  comps=$(cd "$root/src" && for d in */; do printf '%s ' "${d%/}"; done)
  edges "$root" "$comps" | awk -F'\t' '{ d[$1] = d[$1] " " $2 } END { for (c in d) print c ":" d[c] }' |
    sort
}

self_test() {
  local tmp fails=0 out rc
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/src/base" "$tmp/src/app" "$tmp/src/other" "$tmp/src/abi"
  cat >"$tmp/src/CMakeLists.txt" <<'EOF'
add_library(hami_base STATIC base/a.cpp)  # comment (with parentheses)
add_library(hami_abi INTERFACE)
add_library(hami_other STATIC
  other/o.cpp)
add_library(hami_app_core STATIC app/core.cpp)
target_link_libraries(hami_app_core PUBLIC hami_base
  PRIVATE hami_abi $<TARGET_FILE:x>)
add_executable(app app/main.cpp)
target_link_libraries(app PRIVATE hami_app_core)
EOF
  printf '#include "base/a.hpp"\n#include "abi/abi.hpp"\n#include "app/core.hpp"\n' >"$tmp/src/app/core.cpp"
  printf '#include "app/core.hpp"\n#include <vector>\n' >"$tmp/src/app/main.cpp"
  printf '#include "base/a.hpp"\n' >"$tmp/src/other/o.cpp"
  printf '#include "other/o.hpp"\n' >"$tmp/src/app/bad.hpp"
  fail() {
    echo "self-test: FAIL: $*"
    fails=$((fails + 1))
  }
  out=$(check_tree "$tmp" 2>&1)
  rc=$?
  for want in 'src/other/o.cpp:1: includes "base/a.hpp"' 'src/app/bad.hpp:1: includes "other/o.hpp"'; do
    grep -qF "$want" <<<"$out" || fail "not reported: $want"
  done
  [ "$(grep -c '^src/' <<<"$out")" -eq 2 ] || fail "expected exactly 2 problems, got: $out"
  [ "$rc" -eq 1 ] || fail "exit code $rc on a broken tree, expected 1"
  # Declared (and the stray header gone), the same tree passes.
  rm "$tmp/src/app/bad.hpp"
  echo 'target_link_libraries(hami_other PUBLIC hami_base)' >>"$tmp/src/CMakeLists.txt"
  out=$(check_tree "$tmp" 2>&1) || fail "the correct tree was rejected: $out"
  [ "$fails" -eq 0 ] || { echo "check-includes self-test: $fails failure(s)" >&2; return 1; }
  echo "check-includes self-test: every undeclared include reported, the correct tree passes"
}

root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
  --self-test) self_test ;;
  --graph) graph "$root" ;;
  --root)
    [ $# -ge 2 ] || usage
    check_tree "$2" ;;
  "") check_tree "$root" ;;
  *) usage ;;
esac
