#!/usr/bin/env bash
# Builds the test VM's image once: Debian 12 (debootstrap) with Debian's kernel, OpenZFS from
# contrib (zfs-dkms: its module built here by DKMS for that kernel, natively, not in the
# VM), lvm2, mdadm, PostgreSQL 15 and the tools pgfsbench drives. Output, in the cache
# directory given (default /opt/pgfsbench-test/vm): rootfs.img (ext4, made with mkfs -d:
# nothing is mounted from the image), vmlinuz, initrd.img, and build.stamp naming what it
# was built from. Reused while this script is unchanged.
#
# The chroot needs /proc, /sys and /dev while packages install (DKMS, postinst scripts):
# they are bind-mounted under the build directory and unmounted on any exit; the build
# directory is removed. Needs root and the Debian mirror (a package registry).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-/opt/pgfsbench-test/vm}
mirror=${PGFSBENCH_VM_MIRROR:-http://deb.debian.org/debian}
# of the scripts' contents only (not their path: every checkout shares the cache)
stamp_want="$(cat "$here/build-image.sh" "$here/vmtest-init.sh" | sha256sum | cut -c1-16)"
if [ -f "$cache/build.stamp" ] && [ "$(cat "$cache/build.stamp")" = "$stamp_want" ] &&
    [ -f "$cache/rootfs.img" ] && [ -f "$cache/vmlinuz" ] && [ -f "$cache/initrd.img" ]; then
    echo "vm image: reusing $cache (built from this script)"
    exit 0
fi
[ "$(id -u)" = 0 ] || { echo "build-image: needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "build-image: debootstrap is not installed" >&2; exit 1; }
mkdir -p "$cache"
work=$(mktemp -d /var/tmp/pgfsbench-vm-build-XXXXXX)
root="$work/root"
mounted=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
    rm -f "$root/usr/sbin/policy-rc.d" 2>/dev/null || true
    # only once nothing is mounted under it
    if ! grep -q " $work/" /proc/self/mounts; then rm -rf "$work"; fi
}
trap cleanup EXIT
start=$(date +%s)
echo "vm image: debootstrap bookworm into $root"
debootstrap --variant=minbase --components=main,contrib \
    --include=ca-certificates,systemd-sysv,udev,kmod,iproute2,procps,util-linux \
    bookworm "$root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
for d in proc sys dev dev/pts; do
    mount --bind "/$d" "$root/$d"
    mounted+=("$root/$d")
done
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mkdir -p "$root/etc/postgresql-common"
echo 'create_main_cluster = false' > "$root/etc/postgresql-common/createcluster.conf"
echo "deb $mirror bookworm main contrib" > "$root/etc/apt/sources.list"
in_root() { chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }
echo "vm image: kernel, OpenZFS (DKMS), lvm2, mdadm, PostgreSQL 15"
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends \
    linux-image-amd64 linux-headers-amd64 dkms build-essential \
    zfs-dkms zfsutils-linux lvm2 mdadm \
    postgresql-15 postgresql-contrib e2fsprogs xfsprogs btrfs-progs fdisk fio \
    python3 python3-venv > "$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; exit 1; }
kver=$(basename "$(ls -d "$root"/lib/modules/* | sort -V | tail -1)")
if ! find "$root/lib/modules/$kver" -name 'zfs.ko*' | grep -q .; then
    echo "vm image: building the zfs module for $kver"
    in_root dkms autoinstall -k "$kver" > "$work/dkms.log" 2>&1 || { tail -30 "$work/dkms.log" >&2; exit 1; }
fi
find "$root/lib/modules/$kver" -name 'zfs.ko*' | grep -q . ||
    { echo "build-image: no zfs module for $kver" >&2; exit 1; }
in_root depmod "$kver"
in_root modinfo -k "$kver" zfs > "$work/modinfo.txt" 2>&1 ||
    { cat "$work/modinfo.txt" >&2; echo "build-image: modprobe would not find zfs" >&2; exit 1; }
echo "vm image: $(grep -E '^(filename|version):' "$work/modinfo.txt" | tr -s ' ' | paste -sd' ')"
# the modules the VM needs at boot: virtio disks and the 9p shares in the initramfs
printf 'virtio_pci\nvirtio_blk\nvirtio_net\n9p\n9pnet_virtio\next4\n' >> "$root/etc/initramfs-tools/modules"
in_root update-initramfs -u -k "$kver" > "$work/initramfs.log" 2>&1
# the compilers, headers and dkms stay: removing dkms removes zfs-dkms, and with it the
# module it built
in_root apt-get clean
echo pgfsbench-vm > "$root/etc/hostname"
echo '/dev/vda / ext4 rw,relatime 0 1' > "$root/etc/fstab"
passwd_line=$(grep '^root:' "$root/etc/shadow")
sed -i "s|^root:[^:]*:|root::|" "$root/etc/shadow"  # console login without password (a throwaway VM)
: "$passwd_line"
install -m 755 "$here/vmtest-init.sh" "$root/usr/local/sbin/pgfsbench-vmtest"
cat > "$root/etc/systemd/system/pgfsbench-vmtest.service" <<'UNIT'
[Unit]
Description=pgfsbench tests inside the VM, then power off
After=local-fs.target systemd-modules-load.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/pgfsbench-vmtest
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/pgfsbench-vmtest.service \
    "$root/etc/systemd/system/multi-user.target.wants/pgfsbench-vmtest.service"
# nothing else may start work in the VM: no timers, no zfs import-scan
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
    zfs-import-cache.service zfs-import-scan.service zfs-mount.service zfs-zed.service \
    lvm2-monitor.service mdmonitor.service; do
    rm -f "$root"/etc/systemd/system/*.wants/"$unit"
done
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
rm -f "$root/usr/sbin/policy-rc.d"
for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}"; done
mounted=()
size_mb=$(( $(du -sm "$root" | cut -f1) + 1536 ))
echo "vm image: rootfs.img (${size_mb} MB, ext4 from the tree, kernel $kver)"
mkfs.ext4 -q -F -L pgfsbench-vm -d "$root" "$work/rootfs.img" "${size_mb}M"
mv "$work/rootfs.img" "$work/vmlinuz" "$work/initrd.img" "$cache/"
echo "$kver" > "$cache/kernel.version"
echo "$stamp_want" > "$cache/build.stamp"
echo "vm image: built in $(( $(date +%s) - start )) s into $cache"
