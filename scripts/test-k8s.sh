#!/usr/bin/env bash
# The Kubernetes tests (tests/k8s) against a real single-node cluster on this machine:
# opt-in, like scripts/test-vm.sh, not part of .ci/run.
#
#   bash scripts/test-k8s.sh [PYTEST ARGS...]
#
# Builds (or reuses, cached by version in /var/cache/pgfsbench-k8s) the control plane,
# the kubelet and etcd from their Go modules and the pod image (mmdebstrap, no registry),
# starts two clusters, each in a network namespace of its own (scripts/k8s/cluster.sh)
# with two StorageClasses of local volumes on an ext4 and an XFS loop filesystem, links
# the two namespaces (one campaign over both clusters), runs tests/k8s inside the first,
# then stops everything and checks that nothing is left.
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

# a second cluster at once, in a network namespace of its own, for one campaign over two
DIR2=/var/tmp/pgfsb-k8s-test2
for d in "$DIR" "$DIR2"; do
    if [ -e "$d" ]; then bash scripts/k8s/cluster.sh stop "$d"; fi
done
stop() {
    bash scripts/k8s/cluster.sh stop "$DIR2"
    bash scripts/k8s/cluster.sh stop "$DIR"
}
trap stop EXIT
eval "$(bash scripts/k8s/cluster.sh start "$DIR" "$BIN" "$PAUSE_ARCHIVE" "$IMAGE_ARCHIVE" | grep -E '^[A-Z_]+=')"
NETNS1=$NETNS
eval "$(bash scripts/k8s/cluster.sh start "$DIR2" "$BIN" "$PAUSE_ARCHIVE" "$IMAGE_ARCHIVE" | grep -E '^[A-Z_]+=')"
NETNS2=$NETNS
NETNS=$NETNS1
# a link between the two namespaces (the tests run in the first): the second's API server
# at 10.79.0.2, and a kubeconfig of its own (context test2) that says so. The link goes
# with the namespaces.
ns1=$(basename "$NETNS1") ns2=$(basename "$NETNS2")
ip -n "$ns1" link add pgfsb-k8s-a type veth peer name pgfsb-k8s-b netns "$ns2"
ip -n "$ns1" addr add 10.79.0.1/24 dev pgfsb-k8s-a
ip -n "$ns2" addr add 10.79.0.2/24 dev pgfsb-k8s-b
ip -n "$ns1" link set pgfsb-k8s-a up
ip -n "$ns2" link set pgfsb-k8s-b up
sed -e 's#https://127.0.0.1:6443#https://10.79.0.2:6443#' -e 's/\btest\b/test2/g' \
    -e 's/\badmin\b/admin2/g' "$DIR2/kubeconfig" > "$DIR/kubeconfig-test2"
chmod 0600 "$DIR/kubeconfig-test2"
# the nodes Ready, as their apiservers see them
NS=(nsenter "--net=$NETNS")
"${NS[@]}" .venv/bin/python - "$DIR/kubeconfig" "$DIR/kubeconfig-test2" <<'EOF'
import sys, time
from pgfsbench.kube.client import ClusterAddress, LightkubeClient

for path in sys.argv[1:]:
    client = LightkubeClient(ClusterAddress(path))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        node = client.get("Node", "pgfsb-node")
        conditions = {c["type"]: c["status"] for c in ((node or {}).get("status") or {}).get("conditions") or []}
        if conditions.get("Ready") == "True":
            break
        time.sleep(1)
    else:
        sys.exit(f"test-k8s: the node of {path} did not become Ready in 120 s")
EOF
t_ready=$(date +%s)
echo "test-k8s: components $((t_build - t0)) s, image $((t_image - t_build)) s, cluster Ready in $((t_ready - t_image)) s"

status=0
PGFSBENCH_K8S_DIR="$DIR" PGFSBENCH_K8S_DIR2="$DIR2" PGFSBENCH_K8S_IMAGE="$IMAGE" \
    "${NS[@]}" .venv/bin/pytest tests/k8s -p no:cacheprovider -s "$@" || status=$?
t_tests=$(date +%s)
trap - EXIT
stop
left=$(awk -v d="$DIR" 'index($2, d) == 1' /proc/self/mounts; losetup -l -n -O NAME,BACK-FILE | grep "$DIR" || true)
[ -e "$DIR2" ] && left="$left $DIR2"
for ns in "$NETNS1" "$NETNS2"; do
    [ -e "$ns" ] && left="$left network namespace $ns"
    for h in /sys/fs/cgroup/*/; do
        [ -e "$h$(basename "$ns")" ] && left="$left cgroup $h$(basename "$ns")"
    done
done
if [ -n "$left" ]; then
    echo "test-k8s: left behind: $left" >&2
    status=1
fi
echo "test-k8s: tests $((t_tests - t_ready)) s; in all $((t_tests - t0)) s; exit $status"
exit "$status"
