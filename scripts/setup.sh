#!/usr/bin/env bash
# Installs every Debian package the build, tests, fuzzing and demo need.
# Idempotent: installs only what is missing. Runs as root, or through sudo.
#   scripts/setup.sh              the project's packages
#   scripts/setup.sh PACKAGE...   only these (for scripts with needs of their own)
set -euo pipefail

PACKAGES=(
  build-essential g++ cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev zlib1g-dev
  libcpp-httplib-dev libboost-dev libssl-dev libyaml-cpp-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  openssl
  golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev
  clang libclang-rt-14-dev llvm clang-format
  valgrind
  # The end-to-end suite's real node (tests/e2e/node.sh).
  containerd runc containernetworking-plugins busybox-static iproute2
)
if [ $# -gt 0 ]; then PACKAGES=("$@"); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
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
exit $rc
