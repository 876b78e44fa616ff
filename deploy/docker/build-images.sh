#!/usr/bin/env bash
# Builds the images of deploy/docker/*.Dockerfile with Debian's buildah, on a
# Debian base made by debootstrap from Debian's packages: no image registry is
# asked for anything. Each image is written as a docker-archive that
# `ctr images import` and `docker load` read, under the names the chart runs.
#
#   deploy/docker/build-images.sh --build-dir build/release [--out DIR]
#       CI's path: the runtime stage of each Dockerfile (its last FROM on),
#       with COPY --from=build taking the binaries from the build tree
#       instead of the build stage, and its apt-get line checking that the
#       base has those packages (the base is made with them)
#   deploy/docker/build-images.sh --full [--out DIR]
#       the Dockerfiles as they are: both stages, the daemons compiled inside
#       (the build stage installs its toolchain with apt-get; slow)
#   --kube-scheduler BIN   also an image of this kube-scheduler binary (the
#                          chart's sidecar), tagged with the version it
#                          prints under the chart's and upstream's names
#                          (its archive is cached with the base)
#   --tag TAG              tag of our images (default: the chart's appVersion)
#
# Writes DIR/<image>.tar (default DIR build/images) and DIR/images.txt, one
# line "<archive> <name> [<more names>...]" per image. The base is cached as
# a tarball in $HAMI_IMAGE_CACHE (default ~/.cache/hami-e2e/images), keyed by
# its suite, mirror and package list: the runtime stages' apt-get packages;
# buildah keeps its storage there too (buildah-overlay/), apart from the
# machine's. Two builds at once must use two caches.
# Needs root (debootstrap; buildah's chroot isolation) and Debian's buildah
# and debootstrap (installed when missing). Exit 0 built, 1 failed, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

log() { printf 'build-images: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }

mode="" build_dir="" out=build/images kube_scheduler="" tag=""
while [ $# -gt 0 ]; do
  case $1 in
  --build-dir) build_dir=${2:?--build-dir needs a directory} mode=tree && shift ;;
  --full) mode=full ;;
  --out) out=${2:?--out needs a directory} && shift ;;
  --kube-scheduler) kube_scheduler=${2:?--kube-scheduler needs a binary} && shift ;;
  --tag) tag=${2:?--tag needs a tag} && shift ;;
  -h | --help) usage && exit 0 ;;
  *) usage >&2 && exit 2 ;;
  esac
  shift
done
[ -n "$mode" ] || {
  usage >&2
  exit 2
}
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, buildah's chroot isolation)"
SUITE=bookworm
CACHE=${HAMI_IMAGE_CACHE:-$HOME/.cache/hami-e2e/images}
[ -n "$tag" ] || tag=$(awk -F'"' '/^appVersion:/ {print $2}' deploy/helm/hami/Chart.yaml)
mkdir -p "$out" "$CACHE"
out=$(cd "$out" && pwd)
start=$SECONDS

scripts/setup.sh buildah debootstrap >/dev/null
# buildah's own storage under the cache, not the machine's
# /var/lib/containers: overlay where the kernel has it, else vfs (slower,
# works anywhere).
driver=overlay
grep -qw overlay /proc/filesystems || driver=vfs
STORAGE=(--root "$CACHE/buildah-$driver" --runroot "$CACHE/buildah-run" --storage-driver "$driver")
BUILDAH() { buildah "${STORAGE[@]}" "$@"; }

# The runtime stage of a Dockerfile: from its last FROM to the end.
runtime_stage() { awk '/^FROM /{n=NR} {l[NR]=$0} END{for (i=n; i<=NR; i++) print l[i]}' "$1"; }
# The packages its apt-get install names (continuation lines joined).
stage_packages() {
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -E '^RUN .*apt-get .*install' |
    sed -E 's/.*install[^&]*--no-install-recommends//; s/&&.*//' | tr ' ' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' || true
}
DOCKERFILES=(deploy/docker/scheduler.Dockerfile deploy/docker/device-plugin.Dockerfile)
mapfile -t PACKAGES < <(for f in "${DOCKERFILES[@]}"; do runtime_stage "$f" | stage_packages; done | sort -u)
[ ${#PACKAGES[@]} -gt 0 ] || die "no apt-get packages found in the runtime stages of ${DOCKERFILES[*]}"

# The mirror this machine's apt uses (CI machines may reach only that one).
mirror=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1 || true)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "'$SUITE'" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

# ---- the base: debootstrap --variant=minbase with the runtime packages,
# cached as a tarball and, in buildah's storage, as an image tagged by key.
# RECIPE names how the tree is trimmed below; a new recipe makes a new base.
RECIPE=slim2
key=$(printf '%s\n' "$RECIPE" "$SUITE" "$mirror" "${PACKAGES[@]}" | sha256sum | cut -c1-16)
base_tar=$CACHE/debian-$SUITE-minbase-$key.tar
BASE=localhost/hami-debian-base:$key
if [ ! -f "$base_tar" ]; then
  log "debootstrap $SUITE minbase with ${PACKAGES[*]} from $mirror"
  root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase --include="$(
    IFS=,
    echo "${PACKAGES[*]}"
  )" "$SUITE" "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
    die "debootstrap failed; last lines of $CACHE/debootstrap.log: $(tail -5 "$CACHE/debootstrap.log")"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
  # As Debian's -slim images: no translations, manuals or docs but the
  # copyright files (a third of the tree), now or from a later apt-get.
  printf '%s\n' 'path-exclude /usr/share/locale/*' 'path-exclude /usr/share/man/*' \
    'path-exclude /usr/share/info/*' 'path-exclude /usr/share/doc/*' \
    'path-include /usr/share/doc/*/copyright' >"$root/etc/dpkg/dpkg.cfg.d/hami-slim"
  find "$root/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  # And as theirs, apt keeps no package caches in a layer (--full's stages).
  printf '%s\n' 'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' \
    'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
    >"$root/etc/apt/apt.conf.d/hami-clean"
  rm -rf "$root"/usr/share/locale/* "$root"/usr/share/man/* "$root"/usr/share/info/*
  tar -C "$root" --numeric-owner -cf "$base_tar.part" .
  mv "$base_tar.part" "$base_tar"
  # Older bases go, from the cache and from buildah's storage.
  find "$CACHE" -maxdepth 1 -name "debian-$SUITE-minbase-*.tar" ! -name "$(basename "$base_tar")" -delete
  BUILDAH images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/hami-debian-base:' | grep -v ":$key\$" |
    while read -r old; do BUILDAH rmi "$old" >/dev/null 2>&1 || true; done
  rm -rf "$root"
  trap - EXIT
fi
if ! BUILDAH inspect --type image "$BASE" >/dev/null 2>&1; then
  log "importing $(basename "$base_tar") as $BASE"
  c=$(BUILDAH from scratch)
  BUILDAH add "$c" "$base_tar" / >/dev/null
  BUILDAH config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  BUILDAH commit --rm "$c" "$BASE" >/dev/null
fi

: >"$out/images.txt"
# build NAME CONTAINERFILE CONTEXT: image NAME, then its docker-archive.
build() {
  local name=$1 file=$2 context=$3 archive
  archive=$out/$(basename "${1%%:*}").tar
  log "building $name"
  # The previous build's image goes, or each run would leave one behind.
  BUILDAH rmi "localhost/$name" >/dev/null 2>&1 || true
  BUILDAH bud --isolation chroot --pull-never --layers=false --quiet \
    --build-arg DEBIAN_IMAGE="$BASE" -f "$file" -t "localhost/$name" "$context" >/dev/null
  rm -f "$archive"
  BUILDAH push --quiet "localhost/$name" "docker-archive:$archive:$name" >/dev/null
  echo "$archive $name"
}

# The runtime stage with the build tree's binaries: COPY --from=build
# /src/build/release/P takes $build_dir/P; other COPYs take the repository's
# files; the apt-get line becomes a check that the base has its packages.
derive() {
  local dockerfile=$1 context=$2 line src dst
  runtime_stage "$dockerfile" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | while IFS= read -r line; do
    case $line in
    "COPY --from=build "*)
      read -r _ _ src dst <<<"$line"
      src=${src#/src/build/release/}
      mkdir -p "$context/build/$(dirname "$src")"
      cp -L "$REPO/$build_dir/$src" "$context/build/$src"
      echo "COPY build/$src $dst"
      ;;
    "COPY "*)
      read -r _ src dst <<<"$line"
      mkdir -p "$context/$(dirname "$src")"
      cp -L "$REPO/$src" "$context/$src"
      echo "$line"
      ;;
    "RUN "*apt-get*install*)
      echo "RUN dpkg-query -W $(printf '%s\n' "$line" | stage_packages | tr '\n' ' ')>/dev/null"
      ;;
    *) echo "$line" ;;
    esac
  done
}

work=$(mktemp -d "${TMPDIR:-/tmp}/hami-images.XXXXXX")
trap 'rm -rf "$work"' EXIT
for f in "${DOCKERFILES[@]}"; do
  name=$(basename "$f" .Dockerfile)
  case $name in scheduler) name=hami-scheduler ;; device-plugin) name=hami-device-plugin ;; esac
  if [ "$mode" = full ]; then
    build "$name:$tag" "$f" "$REPO" >>"$out/images.txt"
  else
    ctx=$work/$name
    mkdir -p "$ctx"
    { echo "ARG DEBIAN_IMAGE" && derive "$f" "$ctx"; } >"$ctx/Containerfile"
    build "$name:$tag" "$ctx/Containerfile" "$ctx" >>"$out/images.txt"
  fi
done

# kube-scheduler for the chart's sidecar: the version it reports, under the
# chart's default registry and upstream's. The binary seldom changes: its
# archive is cached beside the base, keyed by the binary and the base.
if [ -n "$kube_scheduler" ]; then
  version=$("$kube_scheduler" --version | awk '{print $2}')
  name=registry.k8s.io/kube-scheduler:$version
  cached=$CACHE/kube-scheduler-$key-$(sha256sum "$kube_scheduler" | cut -c1-16).tar
  if [ ! -f "$cached" ]; then
    ctx=$work/kube-scheduler
    mkdir -p "$ctx"
    cp -L "$kube_scheduler" "$ctx/kube-scheduler"
    cat >"$ctx/Containerfile" <<'EOF'
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
COPY kube-scheduler /usr/local/bin/kube-scheduler
ENTRYPOINT ["/usr/local/bin/kube-scheduler"]
EOF
    build "$name" "$ctx/Containerfile" "$ctx" >/dev/null
    rm -f "$CACHE"/kube-scheduler-*.tar
    mv "$out/kube-scheduler.tar" "$cached"
  fi
  ln -f "$cached" "$out/kube-scheduler.tar" 2>/dev/null || cp "$cached" "$out/kube-scheduler.tar"
  echo "$out/kube-scheduler.tar $name registry.cn-hangzhou.aliyuncs.com/google_containers/kube-scheduler:$version" >>"$out/images.txt"
fi
log "built in $((SECONDS - start))s: $(awk '{print $2}' "$out/images.txt" | tr '\n' ' ')"
