#!/usr/bin/env bash
# Builds the real Kubernetes components (and etcd, helm, Prometheus) from their pinned Go modules
# into $BUILD_DIR/go/bin. All four are required by one module, tools/go.mod, so that the packages
# they share (k8s.io/api, apimachinery, client-go, etcd's client, gRPC, protobuf...) resolve to one
# version each and are compiled once: Go's build cache hands helm and Prometheus what the Kubernetes
# build compiled. A component is rebuilt only when go.mod, go.sum, its build flags or the Go
# toolchain changed (a stamp per component records their hash); GOCACHE is reused when present.
#   build-go-tools.sh [COMPONENT...]   COMPONENT: kube, etcd, helm, prometheus (default: all four)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

BIN="$BUILD_DIR/go/bin"
STAMPS="$BUILD_DIR/go/stamps"
mkdir -p "$BIN" "$STAMPS"
export GOFLAGS="${GOFLAGS:-} -trimpath" CGO_ENABLED=0

TOOLS="$ROOT/tools"
all_components=(kube etcd helm prometheus)
components=("$@")
[ ${#components[@]} -gt 0 ] || components=("${all_components[@]}")
for component in "${components[@]}"; do
  if [[ " ${all_components[*]} " != *" $component "* ]]; then
    echo "build-go-tools: no component '$component' (components: ${all_components[*]})" >&2
    exit 2
  fi
done

# The version that tools/go.mod pins for MODULE.
pinned() { awk -v m="$1" '$1 == m {print $2}' "$TOOLS/go.mod" | head -1; }

# build_component NAME LDFLAGS [GO-BUILD-FLAG...] PACKAGE...: builds it if asked for.
build_component() {
  local name=$1 ldflags=$2
  shift 2
  [[ " ${components[*]} " == *" $name "* ]] || return 0
  local hash
  hash=$({ cat "$TOOLS/go.mod" "$TOOLS/go.sum" "$TOOLS"/etcd/*.go; go version; echo "$GOFLAGS $CGO_ENABLED $ldflags $*"; } |
    sha256sum | cut -d' ' -f1)
  if [ -f "$STAMPS/$name" ] && [ "$(cat "$STAMPS/$name")" = "$hash" ]; then
    echo "build-go-tools: $name is up to date"
    return 0
  fi
  local started=$SECONDS
  echo "build-go-tools: building $name ($*) — the first build on a machine takes several minutes"
  (cd "$TOOLS" && go build -ldflags "$ldflags" -o "$BIN/" "$@")
  echo "$hash" >"$STAMPS/$name"
  echo "build-go-tools: $name built in $((SECONDS - started)) s"
}

# The version kube-apiserver reports (/version) and the components print: the pinned module's.
kube_version=$(pinned k8s.io/kubernetes)
kube_minor=$(cut -d. -f2 <<<"$kube_version")
kube_ldflags="-s -w"
for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$kube_minor"
  kube_ldflags+=" -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z -X $v.gitCommit=$kube_version"
done
build_component kube "$kube_ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler

build_component etcd "-s -w" ./etcd

# helm, the real one, from its pinned module (a `tool` line of tools/go.mod). Stamped as helm's
# Makefile stamps a release: `helm version` prints the pinned version, and the Kubernetes version
# it assumes (lint deprecations, .Capabilities) is that of the client-go it is built with.
helm_version=$(pinned helm.sh/helm/v3)
helm_kube_minor=$(pinned k8s.io/client-go | cut -d. -f2)
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$helm_kube_minor"
done
build_component helm "$helm_ldflags" helm.sh/helm/v3/cmd/helm

# Prometheus, the real server (a `tool` line of tools/go.mod; its 3.x releases are the Go
# module's v0.3xx.y), for the dashboard's end-to-end test. Built as its .promu.yml builds a release,
# but with only the service discoveries the test uses: `remove_all_sd` leaves out every
# discovery plugin but file and http, `enable_kubernetes_sd` puts kubernetes_sd_configs back.
# No `builtinassets`: the web UI is not compiled in (the HTTP API and /metrics are all we query).
prometheus_module=$(pinned github.com/prometheus/prometheus)
prometheus_minor=${prometheus_module#v0.}
prometheus_version=${prometheus_minor:0:1}.${prometheus_minor:1}  # v0.316.0 is Prometheus 3.16.0
prometheus_ldflags="-s -w"
for kv in "Version=$prometheus_version" "Revision=$prometheus_module" "Branch=HEAD" "BuildUser=modelfleet" \
  "BuildDate=19700101-00:00:00"; do
  prometheus_ldflags+=" -X github.com/prometheus/common/version.$kv"
done
build_component prometheus "$prometheus_ldflags" -tags=remove_all_sd,enable_kubernetes_sd \
  github.com/prometheus/prometheus/cmd/prometheus
