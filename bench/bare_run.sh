#!/usr/bin/env bash
# One run by hand, as a DBA would script it without pgfsbench: a loop file, mkfs.ext4,
# mount, initdb, start, pgbench -i, a checkpoint and a sync (the load written out), a
# warm-up, the measured pgbench, stop, unmount.
# bench/own_time.py times it against `pgfsbench run` of the same cell.
#   bash bench/bare_run.sh DIR SCALE WARMUP_S DURATION_S [BINDIR]
# DIR must be a new directory of the caller's (everything is made and removed in it).
set -euo pipefail
dir=$1 scale=$2 warmup=$3 duration=$4
bin=${5:-/usr/lib/postgresql/15/bin}
as_pg() { runuser -u postgres -- "$@"; }
loop=
cleanup() {
    as_pg "$bin/pg_ctl" -D "$dir/mnt/pgdata" -m fast -w stop >/dev/null 2>&1 || true
    mountpoint -q "$dir/mnt" && umount "$dir/mnt"
    [ -n "$loop" ] && losetup -d "$loop"
    rm -f "$dir/disk.img"
}
trap cleanup EXIT
truncate -s 4G "$dir/disk.img"
loop=$(losetup --find --show --direct-io=on "$dir/disk.img")
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
mkdir -p "$dir/mnt" "$dir/sock"
mount "$loop" "$dir/mnt"
chown postgres "$dir/mnt" "$dir/sock"
as_pg "$bin/initdb" -D "$dir/mnt/pgdata" -U postgres -A trust --no-instructions >/dev/null
as_pg "$bin/pg_ctl" -D "$dir/mnt/pgdata" -l "$dir/mnt/server.log" -w \
    -o "-c listen_addresses='' -c unix_socket_directories=$dir/sock -c shared_buffers=128MB" \
    start >/dev/null
as_pg "$bin/createdb" -h "$dir/sock" -U postgres pgbench
load_start=$(date +%s.%N)
as_pg "$bin/pgbench" -h "$dir/sock" -U postgres -i -s "$scale" -q pgbench 2>/dev/null
echo "load_seconds $(awk -v a="$load_start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
# the load written out before anything is measured, as pgfsbench does (a checkpoint, then
# syncfs): otherwise the warm-up and the measured phase write it
out_start=$(date +%s.%N)
as_pg "$bin/psql" -h "$dir/sock" -U postgres -q -c CHECKPOINT pgbench
sync -f "$dir/mnt"
echo "write_out_seconds $(awk -v a="$out_start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
if [ "$warmup" != 0 ]; then
    as_pg "$bin/pgbench" -h "$dir/sock" -U postgres -c 4 -j 2 -T "$warmup" pgbench >/dev/null
fi
as_pg "$bin/pgbench" -h "$dir/sock" -U postgres -c 4 -j 2 -T "$duration" -P 1 -n pgbench \
    >"$dir/pgbench.out" 2>&1
grep -E "^tps" "$dir/pgbench.out" | head -1
