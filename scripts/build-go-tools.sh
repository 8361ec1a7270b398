#!/usr/bin/env bash
# Builds the real Kubernetes components (and etcd, helm) from their pinned Go modules in tools/
# into $BUILD_DIR/go/bin. A module is rebuilt only when its go.mod, go.sum or this script changed
# (a stamp per module records their hash); Go's build cache (GOCACHE) is reused when present.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

BIN="$BUILD_DIR/go/bin"
STAMPS="$BUILD_DIR/go/stamps"
mkdir -p "$BIN" "$STAMPS"
export GOFLAGS="${GOFLAGS:-} -trimpath" CGO_ENABLED=0

# build_module NAME DIR LDFLAGS PACKAGE...
build_module() {
  local name=$1 dir=$2 ldflags=$3
  shift 3
  local hash
  hash=$(cat "$dir/go.mod" "$dir/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
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
