#!/bin/sh
# Runs inside the test VM at boot (pgfsbench-vmtest.service): mounts the host's checkout
# (read-only, at the same path as on the host, so its .venv works as it is: same Debian,
# same Python) and the output share, loads the modules this kernel has and the host's
# lacks, runs the tests named on the kernel command line, leaves pytest's result and log in
# the output share, and powers the VM off.
set -u
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p"; }
src=$(arg pgfsbench.src)
tests=$(arg pgfsbench.tests | tr ',' ' ')
out=/mnt/out
mkdir -p "$out"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "$out"
mkdir -p "$src"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro src "$src"
py=$(arg pgfsbench.py)
if [ -n "$py" ]; then
    mkdir -p "$py"
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro py "$py"
fi
{
    echo "kernel: $(uname -r)"
    for m in zfs dm_mod dm_snapshot md_mod raid0 raid1 raid10 loop; do
        modprobe "$m" && echo "module $m loaded" || echo "module $m: not loaded"
    done
    [ -r /sys/module/zfs/version ] && echo "OpenZFS module $(cat /sys/module/zfs/version)"
    cd "$src" || exit 1
    # shellcheck disable=SC2086
    PYTHONDONTWRITEBYTECODE=1 COLUMNS=200 timeout 6000 .venv/bin/python -m pytest \
        -p no:cacheprovider -q -ra $tests \
        --junitxml="$out/junit.xml"
    echo $? > "$out/rc.tmp" && mv "$out/rc.tmp" "$out/rc"
} > "$out/vm.log" 2>&1
sync
umount "$out"
systemctl poweroff --force
