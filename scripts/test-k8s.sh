#!/usr/bin/env bash
# The Kubernetes tests (tests/k8s) against a real single-node cluster on this machine:
# opt-in, like scripts/test-vm.sh, not part of .ci/run.
#
#   bash scripts/test-k8s.sh [PYTEST ARGS...]
#
# Builds (or reuses, cached by version in /var/cache/pgfsbench-k8s) the control plane,
# the kubelet and etcd from their Go modules and the pod image (mmdebstrap, no registry),
# starts the cluster in a network namespace of its own (scripts/k8s/cluster.sh) with two
# StorageClasses of local volumes on an ext4 and an XFS loop filesystem, runs tests/k8s
# inside that namespace, then stops everything and checks that nothing is left.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "test-k8s: needs root" >&2; exit 1; }
CACHE=${PGFSBENCH_K8S_CACHE:-/var/cache/pgfsbench-k8s}
DIR=/var/tmp/pgfsb-k8s-test   # examples/k8s-test-cluster.toml names its kubeconfig
t0=$(date +%s)

need=()
for p in containerd runc containernetworking-plugins mmdebstrap curl openssl; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "test-k8s: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # containerd's package would start the system's containerd: ours is private
    policy=/usr/sbin/policy-rc.d ours=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod 755 "$policy"; ours=1; fi
    status=0
    apt-get install -y -qq --no-install-recommends "${need[@]}" > /dev/null || status=$?
    [ "$ours" = 1 ] && rm -f "$policy"
    [ "$status" = 0 ] || exit "$status"
fi
[ -x .venv/bin/python ] || bash scripts/bootstrap.sh --with-tests

bash scripts/k8s/build-components.sh "$CACHE"
t_build=$(date +%s)
eval "$(bash scripts/k8s/build-image.sh "$CACHE" | grep -E '^[A-Z_]+=')"
t_image=$(date +%s)
BIN="$CACHE/v1.34.4/bin"

[ -e "$DIR" ] && bash scripts/k8s/cluster.sh stop "$DIR"
stop() { bash scripts/k8s/cluster.sh stop "$DIR"; }
trap stop EXIT
eval "$(bash scripts/k8s/cluster.sh start "$DIR" "$BIN" "$PAUSE_ARCHIVE" "$IMAGE_ARCHIVE" | grep -E '^[A-Z_]+=')"
# the node Ready, as the apiserver sees it
NS=(nsenter "--net=$NETNS")
"${NS[@]}" .venv/bin/python - "$DIR/kubeconfig" <<'EOF'
import sys, time
from pgfsbench.kube.client import ClusterAddress, LightkubeClient

client = LightkubeClient(ClusterAddress(sys.argv[1]))
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    node = client.get("Node", "pgfsb-node")
    conditions = {c["type"]: c["status"] for c in ((node or {}).get("status") or {}).get("conditions") or []}
    if conditions.get("Ready") == "True":
        break
    time.sleep(1)
else:
    sys.exit("test-k8s: the node did not become Ready in 120 s")
EOF
t_ready=$(date +%s)
echo "test-k8s: components $((t_build - t0)) s, image $((t_image - t_build)) s, cluster Ready in $((t_ready - t_image)) s"

status=0
PGFSBENCH_K8S_DIR="$DIR" PGFSBENCH_K8S_IMAGE="$IMAGE" \
    "${NS[@]}" .venv/bin/pytest tests/k8s -p no:cacheprovider -s "$@" || status=$?
t_tests=$(date +%s)
trap - EXIT
stop
left=$(awk -v d="$DIR" 'index($2, d) == 1' /proc/self/mounts; losetup -l -n -O NAME,BACK-FILE | grep "$DIR" || true)
[ -e "$NETNS" ] && left="$left network namespace $NETNS"
if [ -n "$left" ]; then
    echo "test-k8s: left behind: $left" >&2
    status=1
fi
echo "test-k8s: tests $((t_tests - t_ready)) s; in all $((t_tests - t0)) s; exit $status"
exit "$status"
