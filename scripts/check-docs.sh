#!/usr/bin/env bash
# Checks that README.md and docs/*.md lead nowhere dead: every relative
# Markdown link names a file that exists (and, with #anchor, a heading of that
# file), every repository path in backticks exists, no page cites files
# outside the repository (shared/, ../shared), and no docs page is over
# 2,000 words. One line per problem (FILE:LINE: what), exit 1 if any.
#   scripts/check-docs.sh              check this repository (run from anywhere)
#   scripts/check-docs.sh --root DIR   check the tree at DIR instead
#   scripts/check-docs.sh --self-test  build a tiny tree with one of each fault
#                                      and assert that each one is reported
# Paths in backticks are checked when they start with src/, bench/, deploy/,
# tests/, scripts/, docs/, fuzz/ or .ci/ (first word of the span, a trailing
# :LINE dropped); ones holding * < > { } or $ are patterns and are skipped.
# Fenced code blocks are not checked.
set -uo pipefail

max_words=2000

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# GitHub's anchor for each heading of FILE, one per line: lower case, only
# letters, digits, spaces, '-' and '_' kept, spaces to '-', repeats get -1, -2.
anchors() {
  awk '/^[ ]*(```|~~~)/ { fence = !fence; next } !fence && /^#+ / { print }' "$1" |
    sed -E 's/^#+ +//; s/ +#+ *$//' |
    tr '[:upper:]' '[:lower:]' |
    sed -E 's/[^[:alnum:] _-]//g; s/ /-/g' |
    awk '{ n = seen[$0]++; print (n ? $0 "-" n : $0) }'
}

# Prints what FILE names, outside fenced code blocks, one per line:
# "link<TAB>LINE<TAB>TARGET" for each relative link ([text](target) or
# [label]: target, inline code removed first) and "path<TAB>LINE<TAB>PATH" for
# each inline code span that starts with a repository directory (first word,
# trailing :LINE and punctuation dropped; patterns skipped).
names() {
  awk '
    /^[ ]*(```|~~~)/ { fence = !fence; next }
    fence { next }
    {
      line = $0
      while (match(line, /`[^`]+`/)) {
        span = substr(line, RSTART + 1, RLENGTH - 2)
        line = substr(line, RSTART + RLENGTH)
        sub(/ .*/, "", span)
        if (span !~ /^(src|bench|deploy|tests|scripts|docs|fuzz|\.ci)\//) continue
        if (span ~ /[*<>{}$]/) continue
        sub(/:[0-9]+(-[0-9]+)?$/, "", span)
        sub(/[.,;:)]+$/, "", span)
        print "path\t" NR "\t" span
      }
      line = $0
      gsub(/`[^`]*`/, "", line)
      if (match(line, /^ ? ? ?\[[^]]+\]: *[^ ]+/)) {
        t = substr(line, RSTART, RLENGTH)
        sub(/^ *\[[^]]+\]: */, "", t)
        emit(t)
      }
      while (match(line, /\]\([^) ]+( "[^"]*")?\)/)) {
        t = substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
        sub(/ ".*$/, "", t)
        emit(t)
      }
    }
    function emit(t) {
      sub(/^</, "", t); sub(/>$/, "", t)
      if (t ~ /^(https?|ftp|mailto):/) return
      print "link\t" NR "\t" t
    }' "$1"
}

# Checks the tree at $1; prints one line per problem, returns 1 if any.
check_tree() {
  local root=$1 problems=0 page dir kind line target file anchor words text
  cd "$root" || { echo "check-docs: cannot enter $root" >&2; return 2; }
  local pages=(README.md docs/*.md)
  report() {
    echo "$1"
    problems=$((problems + 1))
  }
  for page in "${pages[@]}"; do
    [ -f "$page" ] || continue
    dir=$(dirname "$page")
    while IFS=$'\t' read -r kind line target; do
      if [ "$kind" = path ]; then
        [ -e "$target" ] || report "$page:$line: names a path that does not exist: $target"
        continue
      fi
      file=${target%%#*}
      anchor=
      [ "$file" = "$target" ] || anchor=${target#*#}
      if [ -z "$file" ]; then
        file=$page
      else
        file=$dir/$file
      fi
      if [ ! -e "$file" ]; then
        report "$page:$line: link to a missing file: $target"
      elif [ -n "$anchor" ] && [ -f "$file" ] && ! anchors "$file" | grep -qxF -- "$anchor"; then
        report "$page:$line: link to a missing heading: $target (no '#$anchor' in $file)"
      fi
    done < <(names "$page")

    # Citations of files outside the repository.
    while IFS= read -r text; do
      report "$page:${text%%:*}: cites a file outside the repository (shared/): ${text#*:}"
    done < <(grep -nE '(^|[^[:alnum:]_-])shared/' "$page")

    if [ "$page" != README.md ]; then
      words=$(wc -w <"$page")
      [ "$words" -le "$max_words" ] ||
        report "$page: $words words, over the limit of $max_words: cut it"
    fi
  done
  if [ "$problems" -gt 0 ]; then
    echo "check-docs: $problems problem(s) in README.md and docs/*.md" >&2
    return 1
  fi
  echo "check-docs: ${#pages[@]} pages ok"
}

# Builds a tree with one of each fault beside correct uses of each feature,
# and checks that every fault, and nothing else, is reported.
self_test() {
  local tmp out rc fails=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/docs" "$tmp/src/fit" "$tmp/scripts"
  touch "$tmp/src/fit/fit.hpp" "$tmp/scripts/test.sh"
  cat >"$tmp/README.md" <<'EOF'
# Project

See [the guide](docs/guide.md), [its flags](docs/guide.md#flags-and-env), the
[second one](docs/guide.md#flags-and-env-1) and [upstream](https://example.com/x.md).
Code is in `src/fit/fit.hpp:12`, `src/fit/`, `src/*.cpp`, `bench/results/<name>.txt`;
run `scripts/test.sh --quick`.

```
[not checked](docs/inside-a-fence.md) `src/inside/a/fence.cpp`
```
EOF
  cat >"$tmp/docs/guide.md" <<'EOF'
# Guide

## Flags and env

## Flags and env

Back to the [top](#guide), the [readme](../README.md) and a [label].

[label]: ../src/fit/fit.hpp
EOF
  cat >"$tmp/docs/broken.md" <<'EOF'
# Broken

A [dead link](missing.md) and a [dead anchor](guide.md#no-such-heading).
The path `src/fit/gone.cpp` does not exist.
Facts from `shared/reference/hami-k8s.md` and ../shared/DESIGN.md.
A [reference][gone] to nowhere.

[gone]: ../docs/gone.md
EOF
  for _ in $(seq 2100); do printf 'word '; done >>"$tmp/docs/broken.md"
  out=$(check_tree "$tmp" 2>&1)
  rc=$?
  expect() {
    if grep -qF -- "$1" <<<"$out"; then
      echo "self-test: ok: reported: $1"
    else
      echo "self-test: FAIL: not reported: $1"
      fails=$((fails + 1))
    fi
  }
  expect "docs/broken.md:3: link to a missing file: missing.md"
  expect "docs/broken.md:3: link to a missing heading: guide.md#no-such-heading"
  expect "docs/broken.md:4: names a path that does not exist: src/fit/gone.cpp"
  expect "docs/broken.md:5: cites a file outside the repository (shared/)"
  expect "docs/broken.md:8: link to a missing file: ../docs/gone.md"
  expect "docs/broken.md: 2" # word count
  if [ "$(grep -c '^docs/broken.md' <<<"$out")" -ne 6 ]; then
    echo "self-test: FAIL: expected exactly 6 problems in docs/broken.md"
    fails=$((fails + 1))
  fi
  if grep -E '^(README.md|docs/guide.md)' <<<"$out"; then
    echo "self-test: FAIL: a correct page was reported (above)"
    fails=$((fails + 1))
  fi
  if [ "$rc" -ne 1 ]; then
    echo "self-test: FAIL: exit code $rc on a broken tree, expected 1"
    fails=$((fails + 1))
  fi
  rm "$tmp/docs/broken.md"
  if ! out=$(check_tree "$tmp" 2>&1); then
    echo "self-test: FAIL: the correct tree was rejected:"
    echo "$out"
    fails=$((fails + 1))
  fi
  if [ "$fails" -gt 0 ]; then
    echo "check-docs self-test: $fails failure(s)" >&2
    return 1
  fi
  echo "check-docs self-test: every fault reported, the correct tree passes"
}

root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
  "") check_tree "$root" ;;
  --root)
    [ $# -ge 2 ] || usage
    check_tree "$2"
    ;;
  --self-test) self_test ;;
  *) usage ;;
esac
