#!/usr/bin/env bash
# Installs what the end-to-end tests need from Debian and builds
# kube-apiserver, kube-scheduler and kubectl 1.20.2 (and kubelet, for a real
# node; kube-controller-manager, for the chart's Deployment and DaemonSet)
# from Debian's source package `kubernetes`, once: the binaries are
# cached outside the clone so a second run on the same machine skips the
# build, and a binary added later is built alone.
#
#   tests/e2e/build-k8s.sh                 install, build if the cache is stale
#   tests/e2e/build-k8s.sh --with-kubelet  the same, kubelet included
#   tests/e2e/build-k8s.sh --with-kubelet --with-controller-manager
#                                          kubelet and kube-controller-manager too
#   tests/e2e/build-k8s.sh --print         print the cached bin directory and exit
#
# HAMI_E2E_CACHE   cache directory (default ~/.cache/hami-e2e)
# HAMI_E2E_JOBS    parallel Go compile jobs (default 2)
set -euo pipefail

CACHE=${HAMI_E2E_CACHE:-$HOME/.cache/hami-e2e}
BIN=$CACHE/bin
JOBS=${HAMI_E2E_JOBS:-2}

if [ "${1:-}" = "--print" ]; then
  echo "$BIN"
  exit 0
fi
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
WANT=(kube-apiserver kube-scheduler kubectl)
for arg in "$@"; do
  case $arg in
  --with-kubelet) WANT+=(kubelet) ;;
  --with-controller-manager) WANT+=(kube-controller-manager) ;;
  *)
    printf 'build-k8s: unknown argument %s (see --help)\n' "$arg" >&2
    exit 2
    ;;
  esac
done

log() { printf 'build-k8s: %s\n' "$*" >&2; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=(sudo); else
    log "not root and no sudo: cannot install packages"
    exit 1
  fi
fi

PACKAGES=(etcd-server golang-go rsync golang-github-modern-go-reflect2-dev
  dpkg-dev openssl curl)

# `apt-get source` needs a deb-src line. It must point at the mirror the
# machine already uses (CI machines may only reach that one).
ensure_deb_src() {
  if grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return 1
  fi
  local uri
  uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources |
    awk '{print $2}' | grep -v security | head -1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hsE '^deb ' /etc/apt/sources.list | awk '$3 == "bookworm" {print $2}' | head -1 || true)
  fi
  uri=${uri:-http://deb.debian.org/debian}
  log "adding deb-src $uri bookworm main"
  printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" | "${SUDO[@]}" tee /etc/apt/sources.list.d/hami-e2e-src.sources >/dev/null
  return 0
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
need_update=0
ensure_deb_src && need_update=1
if [ ${#missing[@]} -gt 0 ] || [ $need_update -eq 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    # policy-rc.d may or may not stop Debian from starting its own etcd
    # service; the control plane uses its own ports either way.
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

src_version=$(apt-cache showsrc kubernetes 2>/dev/null | awk '/^Version:/ {print $2; exit}')
if [ -z "$src_version" ]; then
  log "no source package 'kubernetes' visible to apt (deb-src missing?)"
  exit 1
fi
reflect2_version=$(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)
go_version=$(go env GOVERSION)
stamp="kubernetes=$src_version reflect2=$reflect2_version $go_version"

# What is cached was built from this stamp; anything else is rebuilt.
if [ ! -f "$BIN/STAMP" ] || [ "$(cat "$BIN/STAMP")" != "$stamp" ]; then
  rm -f "$BIN/STAMP"
  for b in kube-apiserver kube-scheduler kubectl kubelet kube-controller-manager; do rm -f "$BIN/$b"; done
fi
build=()
for b in "${WANT[@]}"; do
  [ -x "$BIN/$b" ] || build+=("$b")
done
if [ ${#build[@]} -eq 0 ]; then
  log "cached: $BIN ($stamp)"
  exit 0
fi

start=$SECONDS
mkdir -p "$CACHE/src"
cd "$CACHE/src"
orig=$(compgen -G 'kubernetes_*.orig.tar.gz' | head -1 || true)
if [ -z "$orig" ] || ! grep -q "${src_version%-*}" <<<"$orig"; then
  rm -f kubernetes_*
  log "fetching source package kubernetes $src_version"
  # --download-only: the upstream tarball is used as is, without Debian's
  # patches (they only touch kubectl's printing and one CVE fix).
  apt-get source --download-only -qq kubernetes
  orig=$(compgen -G 'kubernetes_*.orig.tar.gz' | head -1)
fi

tree=$CACHE/src/tree
rm -rf "$tree"
mkdir -p "$tree"
log "unpacking $orig"
tar xzf "$orig" -C "$tree" --strip-components=1

# reflect2 v1.0.1 (vendored) reads Go's map internals the way Go < 1.18 laid
# them out; with Go 1.19 the apiserver dies in mapiterinit. 1.0.2 is the
# upstream fix and has the same API, so it drops in under the same path.
r2=/usr/share/gocode/src/github.com/modern-go/reflect2
rm -rf "$tree/vendor/github.com/modern-go/reflect2"
mkdir -p "$tree/vendor/github.com/modern-go/reflect2"
find "$r2" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' \
  -exec cp {} "$tree/vendor/github.com/modern-go/reflect2/" \;

logfile=$CACHE/build.log
log "building ${build[*]} (log: $logfile)"
cd "$tree"
# KUBE_GIT_VERSION: a tarball has no git metadata; the version is what
# `kubectl version` and discovery report.
if ! nice -n 10 env GOFLAGS="-p=$JOBS" GOCACHE="$CACHE/gocache" \
  KUBE_GIT_VERSION="v1.20.2" KUBE_GIT_TREE_STATE=clean \
  make WHAT="${build[*]/#/cmd/}" >"$logfile" 2>&1; then
  log "build failed; last lines of $logfile:"
  tail -30 "$logfile" >&2
  exit 1
fi

mkdir -p "$BIN"
for b in "${build[@]}"; do
  install -m 0755 "_output/bin/$b" "$BIN/$b"
done
echo "$stamp" >"$BIN/STAMP"
cd "$CACHE"
rm -rf "$tree"
log "built in $((SECONDS - start))s: $BIN ($stamp)"
