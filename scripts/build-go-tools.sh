#!/usr/bin/env bash
# Builds the real Kubernetes components (and etcd, helm, Prometheus) from their pinned Go modules
# in tools/ into $BUILD_DIR/go/bin. A module is rebuilt only when its go.mod, go.sum, its build
# flags or the Go toolchain changed (a stamp per module records their hash); Go's build cache
# (GOCACHE) is reused when present.
#   build-go-tools.sh [MODULE...]   MODULE: kube, etcd, helm, prometheus (default: all four)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

BIN="$BUILD_DIR/go/bin"
STAMPS="$BUILD_DIR/go/stamps"
mkdir -p "$BIN" "$STAMPS"
export GOFLAGS="${GOFLAGS:-} -trimpath" CGO_ENABLED=0

all_modules=(kube etcd helm prometheus)
modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=("${all_modules[@]}")
for module in "${modules[@]}"; do
  if [[ " ${all_modules[*]} " != *" $module "* ]]; then
    echo "build-go-tools: no module '$module' (modules: ${all_modules[*]})" >&2
    exit 2
  fi
done

# build_module NAME DIR LDFLAGS [GO-BUILD-FLAG...] PACKAGE...: builds it if asked for.
build_module() {
  local name=$1 dir=$2 ldflags=$3
  shift 3
  [[ " ${modules[*]} " == *" $name "* ]] || return 0
  local hash
  hash=$({ cat "$dir/go.mod" "$dir/go.sum"; go version; echo "$GOFLAGS $CGO_ENABLED $ldflags $*"; } |
    sha256sum | cut -d' ' -f1)
  if [ -f "$STAMPS/$name" ] && [ "$(cat "$STAMPS/$name")" = "$hash" ]; then
    echo "build-go-tools: $name is up to date"
    return 0
  fi
  local started=$SECONDS
  echo "build-go-tools: building $name ($*) — the first build on a machine takes several minutes"
  (cd "$dir" && go build -ldflags "$ldflags" -o "$BIN/" "$@")
  echo "$hash" >"$STAMPS/$name"
  echo "build-go-tools: $name built in $((SECONDS - started)) s"
}

# The version kube-apiserver reports (/version) and the components print: the pinned module's.
kube_version=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$ROOT/tools/kube/go.mod" | head -1)
kube_minor=$(cut -d. -f2 <<<"$kube_version")
kube_ldflags="-s -w"
for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$kube_minor"
  kube_ldflags+=" -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z -X $v.gitCommit=$kube_version"
done
build_module kube "$ROOT/tools/kube" "$kube_ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler

build_module etcd "$ROOT/tools/etcd" "-s -w" .

# helm, the real one, from its pinned module (tools/helm/go.mod's `tool` line). Stamped as helm's
# Makefile stamps a release: `helm version` prints the pinned version, and the Kubernetes version
# it assumes (lint deprecations, .Capabilities) is that of the client-go it is built with.
helm_version=$(awk '$1 == "helm.sh/helm/v3" {print $2}' "$ROOT/tools/helm/go.mod" | head -1)
helm_kube_minor=$(awk '$1 == "k8s.io/client-go" {print $2}' "$ROOT/tools/helm/go.mod" | head -1 | cut -d. -f2)
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$helm_kube_minor"
done
build_module helm "$ROOT/tools/helm" "$helm_ldflags" helm.sh/helm/v3/cmd/helm

# Prometheus, the real server (tools/prometheus/go.mod's `tool` line; its 3.x releases are the Go
# module's v0.3xx.y), for the dashboard's end-to-end test. Built as its .promu.yml builds a release,
# but with only the service discoveries the test uses: `remove_all_sd` leaves out every
# discovery plugin but file and http, `enable_kubernetes_sd` puts kubernetes_sd_configs back.
# No `builtinassets`: the web UI is not compiled in (the HTTP API and /metrics are all we query).
prometheus_module=$(awk '$1 == "github.com/prometheus/prometheus" {print $2}' "$ROOT/tools/prometheus/go.mod" | head -1)
prometheus_minor=${prometheus_module#v0.}
prometheus_version=${prometheus_minor:0:1}.${prometheus_minor:1}  # v0.316.0 is Prometheus 3.16.0
prometheus_ldflags="-s -w"
for kv in "Version=$prometheus_version" "Revision=$prometheus_module" "Branch=HEAD" "BuildUser=modelfleet" \
  "BuildDate=19700101-00:00:00"; do
  prometheus_ldflags+=" -X github.com/prometheus/common/version.$kv"
done
build_module prometheus "$ROOT/tools/prometheus" "$prometheus_ldflags" -tags=remove_all_sd,enable_kubernetes_sd \
  github.com/prometheus/prometheus/cmd/prometheus
