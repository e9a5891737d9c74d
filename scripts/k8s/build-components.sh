#!/usr/bin/env bash
# Builds the Kubernetes control plane, the kubelet and etcd from their Go modules, once per
# version, into a cache outside the checkout (for scripts/test-k8s.sh; not used by pgfsbench
# itself, which talks to any cluster through its kubeconfig).
#
#   scripts/k8s/build-components.sh [CACHE_DIR]    (default /var/cache/pgfsbench-k8s)
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod points its staging modules at
# ./staging/..., which a module download does not have. A wrapper module requires it and
# replaces each of those with its published v0.X.Y. The version is stamped at link time, or
# every component says v0.0.0-master. About 30 min of one core the first time (kubelet 21);
# at the lowest priority so that the machine stays usable.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.4}
CACHE=${1:-/var/cache/pgfsbench-k8s}
OUT="$CACHE/$K8S_VERSION/bin"
COMPONENTS=(kubelet kube-apiserver kube-controller-manager kube-scheduler)

have_all() {
    for c in "${COMPONENTS[@]}" etcd; do [ -x "$OUT/$c" ] || return 1; done
}
if have_all; then
    echo "build-components: $OUT has every component ($K8S_VERSION, etcd $ETCD_VERSION)"
    exit 0
fi
GO=$(command -v go || true)
[ -z "$GO" ] && [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go
[ -n "$GO" ] || { echo "build-components: Go is needed (see scripts/bootstrap.sh)" >&2; exit 1; }

mkdir -p "$OUT" "$CACHE/src"
work="$CACHE/src/wrapper-$K8S_VERSION"
mkdir -p "$work"
cd "$work"
staging="v0.${K8S_VERSION#v1.}"
if [ ! -f go.sum ]; then
    cat > go.mod <<MOD
module pgfsbench.local/k8s-components

go 1.24

require k8s.io/kubernetes $K8S_VERSION
MOD
    printf 'package main\n' > tools.go
    printf '//go:build tools\n\npackage main\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kubelet"\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' > tools.go
    modfile=$("$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
    # each "k8s.io/X => ./staging/src/k8s.io/X" becomes "k8s.io/X => k8s.io/X v0.Y.Z"
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$modfile" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}' >> go.mod
    echo "build-components: $(grep -c '^replace' go.mod) staging modules replaced by $staging"
    "$GO" mod tidy
fi
pkg=k8s.io/component-base/version
cpkg=k8s.io/client-go/pkg/version
major=${K8S_VERSION#v}; major=${major%%.*}
minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
flags="-s -w"
for p in $pkg $cpkg; do
    flags="$flags -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
for c in "${COMPONENTS[@]}"; do
    [ -x "$OUT/$c" ] && continue
    start=$(date +%s)
    nice -n 19 "$GO" build -p 1 -trimpath -ldflags "$flags" -o "$OUT/$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$OUT/$c.tmp" "$OUT/$c"
    echo "build-components: $c in $(( $(date +%s) - start )) s"
done
if [ ! -x "$OUT/etcd" ]; then
    ework="$CACHE/src/etcd-$ETCD_VERSION"
    mkdir -p "$ework"
    cd "$ework"
    if [ ! -f go.mod ]; then
        printf 'module pgfsbench.local/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
        printf '//go:build tools\n\npackage main\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
        "$GO" mod tidy
    fi
    start=$(date +%s)
    nice -n 19 "$GO" build -p 1 -trimpath -ldflags "-s -w" -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$OUT/etcd.tmp" "$OUT/etcd"
    echo "build-components: etcd in $(( $(date +%s) - start )) s"
fi
have_all && echo "build-components: done, $OUT"
