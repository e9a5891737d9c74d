#!/usr/bin/env bash
# The tests that need a kernel this machine lacks (OpenZFS in the kernel, device-mapper,
# md), run in a VM under software emulation (qemu, no KVM here): slow, for function only,
# never for figures.
#
#   bash scripts/test-vm.sh [TEST PATHS...]     (default: tests/vm tests/func/test_zfs.py)
#
# Builds the image once (scripts/vm/build-image.sh, cached in /opt/pgfsbench-test/vm),
# boots it with four empty virtual disks and this checkout shared read-only at its own
# path, runs the tests inside, and brings back pytest's result and log (vm-test/ in the
# work directory, copied to /var/tmp/pgfsbench-vm-last). The VM runs on a throwaway
# overlay (-snapshot): the cached image is never written. qemu is ended by its pid on any
# exit; the work directory is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
cache=${PGFSBENCH_VM_CACHE:-/opt/pgfsbench-test/vm}
timeout_s=${PGFSBENCH_VM_TIMEOUT:-7200}
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(tests/vm tests/func/test_zfs.py)
[ "$(id -u)" = 0 ] || { echo "test-vm: needs root" >&2; exit 1; }
started=$(date +%s)

need=()
for p in debootstrap qemu-system-x86 qemu-utils; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "test-vm: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" > /dev/null
fi
[ -x .venv/bin/python ] || bash scripts/bootstrap.sh --with-tests
bash scripts/vm/build-image.sh "$cache"

work=$(mktemp -d /var/tmp/pgfsbench-vm-XXXXXX)
qpid=""
finish() {
    if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
        kill "$qpid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$qpid" 2>/dev/null || true
    fi
    if [ -d "$work/out" ]; then
        rm -rf /var/tmp/pgfsbench-vm-last
        cp -r "$work/out" /var/tmp/pgfsbench-vm-last 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap finish EXIT
mkdir "$work/out"
disks=()
for i in 1 2 3 4; do
    truncate -s 2G "$work/disk$i.raw"
    disks+=(-drive "file=$work/disk$i.raw,if=virtio,format=raw,cache=unsafe")
done
joined=$(IFS=,; echo "${tests[*]}")
# the venv's interpreter: Debian's (the VM has the same) or another build (pyenv...),
# shared read-only at its own path so the venv's links resolve in the VM too
pybase=$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')
share_py=()
pyarg=""
if [ "$pybase" != /usr ]; then
    share_py=(-virtfs "local,path=$pybase,mount_tag=py,security_model=none,readonly=on")
    pyarg="pgfsbench.py=$pybase"
fi
echo "test-vm: booting $(cat "$cache/kernel.version") under qemu (TCG) to run: ${tests[*]}"
qemu-system-x86_64 \
    -machine q35 -accel tcg,thread=multi -cpu max -smp 2 -m 4096 \
    -nographic -no-reboot -serial "file:$work/out/console.log" -monitor none \
    -kernel "$cache/vmlinuz" -initrd "$cache/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 quiet systemd.show_status=0 pgfsbench.src=$src pgfsbench.tests=$joined $pyarg" \
    -drive "file=$cache/rootfs.img,if=virtio,format=raw" -snapshot \
    "${disks[@]}" \
    -virtfs "local,path=$src,mount_tag=src,security_model=none,readonly=on" \
    -virtfs "local,path=$work/out,mount_tag=out,security_model=none" \
    "${share_py[@]}" \
    -nic none &
qpid=$!
deadline=$(( $(date +%s) + timeout_s ))
while kill -0 "$qpid" 2>/dev/null; do
    if [ "$(date +%s)" -gt "$deadline" ]; then
        echo "test-vm: the VM did not finish in ${timeout_s} s; stopping it" >&2
        break
    fi
    sleep 5
done
wait "$qpid" 2>/dev/null || true
qpid=""
elapsed=$(( $(date +%s) - started ))
if [ ! -f "$work/out/rc" ]; then
    echo "test-vm: no result from the VM (console: /var/tmp/pgfsbench-vm-last/console.log)" >&2
    tail -30 "$work/out/console.log" >&2 || true
    tail -30 "$work/out/vm.log" >&2 2>/dev/null || true
    exit 1
fi
rc=$(cat "$work/out/rc")
tail -25 "$work/out/vm.log"
echo "test-vm: pytest in the VM exited $rc; ${elapsed} s in all; logs in /var/tmp/pgfsbench-vm-last"
exit "$rc"
