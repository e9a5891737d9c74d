#!/usr/bin/env bash
# A real single-node Kubernetes for pgfsbench's cluster tests, on this machine only:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet and containerd,
# all inside a network namespace this script creates (no address of the host is used, no
# packet leaves it), each started by this script and stopped by its recorded pid.
#
#   scripts/k8s/cluster.sh start DIR BIN_DIR IMAGE_ARCHIVE... # prints KUBECONFIG=...
#   scripts/k8s/cluster.sh stop DIR                          # leaves nothing behind
#   scripts/k8s/cluster.sh api-stop DIR | api-start DIR       # the API server away, back
#
# DIR is created here (0700, root's) and removed by stop. Two StorageClasses, "ext4-local"
# and "xfs-local", are backed by two loop-mounted filesystems under DIR: tests create the
# local PersistentVolumes they need under DIR/volumes/{ext4,xfs}/.
# Recipe and pitfalls: ../shared/reference/kubernetes-test-cluster.md (restrict_oom_score_adj,
# failCgroupV1: false on a cgroup v1 host, InternalIP for the apiserver's kubelet calls).
set -euo pipefail

NODE=pgfsb-node
NODE_IP=10.77.0.1
GATEWAY=10.77.0.2
POD_CIDR=10.88.0.0/24
SERVICE_CIDR=10.96.0.0/24

cmd=${1:?start or stop}
DIR=${2:?the cluster directory}
NETNS="pgfsb-k8s-$(printf '%s' "$DIR" | sha256sum | cut -c1-8)"
# the kubelet's cgroups under a root of this cluster's own (two clusters at once must not
# see each other's pods as orphans), in every hierarchy
CGROOT="$NETNS"
NS=(nsenter "--net=/run/netns/$NETNS")

log() { echo "cluster: $*" >&2; }

# a recorded pid is signalled only while it is still the program we started
stop_pid() {
    local name=$1 pidfile="$DIR/pids/$1.pid" pid exe
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
    if [ -n "$exe" ] && [ "$(basename "${exe% (deleted)}")" = "$(cat "$DIR/pids/$name.exe")" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

start_daemon() {
    local name=$1; shift
    "${NS[@]}" "$@" >"$DIR/logs/$name.log" 2>&1 &
    echo $! > "$DIR/pids/$name.pid"
    basename "$1" > "$DIR/pids/$name.exe"
}

wait_for() {
    local what=$1 deadline=$(( $(date +%s) + $2 )); shift 2
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "$what did not come up; the last lines of its log:"
            return 1
        fi
        sleep 0.5
    done
}

do_stop() {
    [ -d "$DIR" ] || return 0
    for c in kube-scheduler kube-controller-manager kube-apiserver; do stop_pid "$c"; done
    stop_pid kubelet
    if [ -S "$DIR/containerd.sock" ]; then
        local ctr=(ctr --address "$DIR/containerd.sock" -n k8s.io)
        for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
            "${ctr[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
        done
        for _ in $(seq 1 50); do
            [ -z "$("${ctr[@]}" tasks ls -q 2>/dev/null)" ] && break
            sleep 0.1
        done
        for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true; done
        for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do "${ctr[@]}" containers delete "$c" >/dev/null 2>&1 || true; done
    fi
    stop_pid containerd
    stop_pid etcd
    # every mount under DIR, deepest first (the kubelet's volumes, containerd's rootfs and
    # shm, the two test filesystems)
    awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" || true
    done
    for img in "$DIR"/disks/*.img; do
        [ -e "$img" ] || continue
        losetup -j "$img" -O NAME -n | while read -r dev; do losetup -d "$dev" || true; done
    done
    ip netns del "$NETNS" 2>/dev/null || true
    # the kubelet's cgroups (cgroupfs driver): its root and everything in it, in every
    # hierarchy
    for h in /sys/fs/cgroup/*/; do
        [ -d "$h/$CGROOT" ] || continue
        find "$h/$CGROOT" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
    rm -rf "$DIR"
    log "stopped; $DIR removed"
}

# the API server alone (also `api-start` after `api-stop`: a cluster whose API is away).
# It listens on every address of its network namespace: loopback, the node's, and a link
# scripts/test-k8s.sh makes to another cluster's namespace (one controller, two clusters)
start_apiserver() {
    local bin token
    bin=$(cat "$DIR/etc/bin")
    token=$(cut -d, -f1 "$DIR/pki/tokens.csv")
    start_daemon kube-apiserver "$bin/kube-apiserver" \
        --etcd-servers http://127.0.0.1:2379 --secure-port 6443 \
        --bind-address 0.0.0.0 \
        --advertise-address "$NODE_IP" --cert-dir "$DIR/pki/apiserver" \
        --token-auth-file "$DIR/pki/tokens.csv" --authorization-mode AlwaysAllow \
        --service-account-key-file "$DIR/pki/sa.pub" \
        --service-account-signing-key-file "$DIR/pki/sa.key" \
        --service-account-issuer https://kubernetes.default.svc \
        --service-cluster-ip-range "$SERVICE_CIDR" --endpoint-reconciler-type none \
        --disable-admission-plugins ServiceAccount \
        --kubelet-preferred-address-types InternalIP --allow-privileged=true
    wait_for kube-apiserver 90 "${NS[@]}" curl -ksf -H "Authorization: Bearer $token" https://127.0.0.1:6443/readyz
}

do_start() {
    local bin=${3:?the directory of the built components}
    shift 3
    local archives=("$@")
    if [ -e "$DIR" ]; then log "$DIR exists: stop it first"; exit 1; fi
    mkdir -m 0700 -p "$DIR"
    mkdir -p "$DIR"/{pids,logs,pki,cni,etc,disks,volumes,mnt}
    trap 'log "start failed; stopping what was started"; tail -n 20 "$DIR"/logs/*.log >&2 || true; do_stop' ERR

    # the network namespace: a veth pair with both ends inside, the node's address on one
    ip netns add "$NETNS"
    ip -n "$NETNS" link set lo up
    ip -n "$NETNS" link add veth-node type veth peer name veth-gw
    ip -n "$NETNS" addr add "$NODE_IP/24" dev veth-node
    ip -n "$NETNS" addr add "$GATEWAY/24" dev veth-gw
    ip -n "$NETNS" link set veth-node up
    ip -n "$NETNS" link set veth-gw up
    ip -n "$NETNS" route add default via "$GATEWAY" dev veth-node

    # two filesystems for the two StorageClasses
    for fs in ext4 xfs; do
        truncate -s 4G "$DIR/disks/$fs.img"
        if [ "$fs" = ext4 ]; then mkfs.ext4 -q -F "$DIR/disks/$fs.img"; else mkfs.xfs -q -f "$DIR/disks/$fs.img"; fi
        dev=$(losetup -f --show "$DIR/disks/$fs.img")
        mkdir -p "$DIR/volumes/$fs"
        mount "$dev" "$DIR/volumes/$fs"
    done

    # keys and the token (AlwaysAllow: a test cluster in its own network namespace)
    openssl genrsa -out "$DIR/pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$DIR/pki/sa.key" -pubout -out "$DIR/pki/sa.pub" 2>/dev/null
    token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    echo "$token,admin,admin,system:masters" > "$DIR/pki/tokens.csv"
    cat > "$DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: "$token"}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
EOF
    chmod 0600 "$DIR/kubeconfig"

    start_daemon etcd "$bin/etcd" --data-dir "$DIR/etcd" --unsafe-no-fsync \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380 --log-level warn
    echo "$bin" > "$DIR/etc/bin"
    start_apiserver
    start_daemon kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig "$DIR/kubeconfig" --leader-elect=false \
        --service-account-private-key-file "$DIR/pki/sa.key" \
        --controllers '*,-serviceaccount-token,-root-ca-cert-publisher' \
        --bind-address 127.0.0.1 --secure-port 10257
    start_daemon kube-scheduler "$bin/kube-scheduler" --kubeconfig "$DIR/kubeconfig" \
        --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259

    # containerd of its own (root, state, socket), the CNI bridge inside the namespace
    cat > "$DIR/cni/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "pgfsb", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$DIR/cni-ipam"}},
  {"type": "loopback"}]}
EOF
    pause_name=$(tar -xOf "${archives[0]}" index.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifests"][0]["annotations"]["io.containerd.image.name"])')
    cat > "$DIR/etc/containerd.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$DIR/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_name"
  restrict_oom_score_adj = true
  # the pods' network namespaces under DIR (not /run/netns): stop unmounts them with the rest
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
    start_daemon containerd /usr/bin/containerd --config "$DIR/etc/containerd.toml"
    wait_for containerd 30 ctr --address "$DIR/containerd.sock" version
    for a in "${archives[@]}"; do
        ctr --address "$DIR/containerd.sock" -n k8s.io images import --no-unpack=false "$a" >/dev/null
    done

    for h in /sys/fs/cgroup/*/; do
        mkdir -p "$h/$CGROOT"
        if [ -f "$h/cpuset.cpus" ]; then  # a new cpuset has no CPUs and no memory nodes
            cat "$h/cpuset.cpus" > "$h/$CGROOT/cpuset.cpus"
            cat "$h/cpuset.mems" > "$h/$CGROOT/cpuset.mems"
        fi
    done
    cat > "$DIR/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: "/$CGROOT"
podLogsDir: "$DIR/pod-logs"
failCgroupV1: false
failSwapOn: false
resolvConf: ""
podCIDR: "$POD_CIDR"
address: "$NODE_IP"
readOnlyPort: 0
containerRuntimeEndpoint: "unix://$DIR/containerd.sock"
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
enforceNodeAllocatable: []
serializeImagePulls: false
imageGCHighThresholdPercent: 100
EOF
    start_daemon kubelet "$bin/kubelet" --config "$DIR/etc/kubelet.yaml" \
        --kubeconfig "$DIR/kubeconfig" --root-dir "$DIR/kubelet" --cert-dir "$DIR/pki/kubelet" \
        --hostname-override "$NODE" --node-ip "$NODE_IP" \
        --node-labels "topology.kubernetes.io/zone=test-zone-a,node.kubernetes.io/instance-type=test.2cpu"
    trap - ERR
    echo "KUBECONFIG=$DIR/kubeconfig"
    echo "NETNS=/run/netns/$NETNS"
    echo "NODE=$NODE"
}

case "$cmd" in
    start) do_start "$@" ;;
    stop) do_stop ;;
    api-stop) stop_pid kube-apiserver ;;
    api-start) start_apiserver ;;
    *) echo "usage: $0 start DIR BIN_DIR PAUSE_ARCHIVE [IMAGE_ARCHIVE...] | stop DIR | api-stop DIR | api-start DIR" >&2; exit 2 ;;
esac
