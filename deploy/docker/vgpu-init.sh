#!/bin/bash
# Installs the image's libvgpu.so into the host's vgpu directory; the init
# container of the device-plugin DaemonSet runs it before the plugin starts,
# because Allocate mounts <hook-path>/vgpu/libvgpu.so from the host into every
# GPU container and fails the pod when it is missing.
#
#   vgpu-init.sh HOST_VGPU_DIR      e.g. /usr/local/vgpu (mounted at that path)
#
# The file is replaced by rename: containers already running keep the copy
# they mapped, new ones get the new one.
set -euo pipefail

dest=${1:?usage: vgpu-init.sh HOST_VGPU_DIR (the host directory, mounted at the same path)}
src=${HAMI_LIBVGPU:-/usr/local/lib/hami/libvgpu.so}

if [ ! -f "$src" ]; then
  echo "vgpu-init: $src is not in the image; rebuild it with deploy/docker/device-plugin.Dockerfile" >&2
  exit 1
fi
mkdir -p "$dest"
if [ -f "$dest/libvgpu.so" ] && cmp -s "$src" "$dest/libvgpu.so"; then
  echo "vgpu-init: $dest/libvgpu.so is up to date"
  exit 0
fi
tmp=$(mktemp "$dest/.libvgpu.so.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cp "$src" "$tmp"
chmod 0755 "$tmp"
mv -f "$tmp" "$dest/libvgpu.so"
trap - EXIT
echo "vgpu-init: installed $dest/libvgpu.so"
