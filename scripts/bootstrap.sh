#!/usr/bin/env bash
# Installs everything pgfsbench needs on a fresh Debian 12 machine (as root):
# the Debian packages it drives, uv, and the locked Python environment in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(postgresql-15 postgresql-contrib pgbouncer sysbench fio e2fsprogs xfsprogs btrfs-progs fdisk
      zfs-fuse util-linux procps chromium)
# --with-tests: what only the tests need (an OpenSSH server the fleet test starts on a
# private port of 127.0.0.1, its own keys, and stops by pid; Prometheus, which the live
# metrics test starts on a private port with its own configuration and stops by pid)
if [ "${1:-}" = "--with-tests" ]; then
    DEBS+=(openssh-server openssh-client prometheus)
fi
missing=()
for p in "${DEBS[@]}"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bootstrap: missing Debian packages (${missing[*]}); run as root to install them" >&2
        exit 1
    fi
    echo "bootstrap: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Debian's postgresql package would create and start a cluster; pgfsbench makes its own.
    mkdir -p /etc/postgresql-common
    grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf ||
        echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf
    # Nothing installed here may start a service (no sshd on port 22, no cluster): a
    # policy-rc.d of ours for the time of the install, removed afterwards.
    policy=/usr/sbin/policy-rc.d
    ours=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && ours=1
    fi
    status=0
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
    [ "$ours" = 1 ] && rm -f "$policy"
    [ "$status" = 0 ] || exit "$status"
fi

if ! command -v uv >/dev/null 2>&1; then
    python3 -m pip install -q uv==0.13.8 2>/dev/null ||
        python3 -m pip install -q --break-system-packages uv==0.13.8
fi
uv sync --frozen --quiet
# Byte-compile the environment and pgfsbench once (uv does not, and PYTHONDONTWRITEBYTECODE
# may be set): every pgfsbench command then starts in under a second instead of 2-4 s.
# Files already compiled are skipped; a file that does not compile is no reason to stop.
.venv/bin/python -m compileall -q -j 0 .venv/lib/python3*/site-packages src >/dev/null || true

# The emulated disk's daemon (native/diskmodel, Go and go-fuse from the Go module proxy),
# built into .venv/bin when its sources are newer than the binary. Without Go, emulated
# disks (device = { model = ... }) are refused with this reason; nothing else needs it.
GO=$(command -v go || true)
[ -z "$GO" ] && [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go
disk=.venv/bin/pgfsbench-disk
if [ -n "$GO" ]; then
    if [ ! -x "$disk" ] || [ -n "$(find native/diskmodel -newer "$disk" -name '*.go' -o -newer "$disk" -name 'go.*')" ]; then
        (cd native/diskmodel && CGO_ENABLED=0 "$GO" build -trimpath -o "../../$disk" .)
    fi
    # the replayer of captured workloads (native/replayer, Go and pgx): tool = "replay"
    replay=.venv/bin/pgfsbench-replay
    if [ ! -x "$replay" ] || [ -n "$(find native/replayer -newer "$replay" -name '*.go' -o -newer "$replay" -name 'go.*')" ]; then
        (cd native/replayer && CGO_ENABLED=0 "$GO" build -trimpath -o "../../$replay" .)
    fi
    # the relay of wire captures (native/replayer/wirecap): capture --wire
    wirecap=.venv/bin/pgfsbench-wirecap
    if [ ! -x "$wirecap" ] || [ -n "$(find native/replayer/wirecap -newer "$wirecap" -name '*.go')" ]; then
        (cd native/replayer && CGO_ENABLED=0 "$GO" build -trimpath -o "../../$wirecap" ./wirecap)
    fi
else
    echo "bootstrap: no Go toolchain: pgfsbench-disk (emulated disks), pgfsbench-replay (tool = \"replay\") and pgfsbench-wirecap (capture --wire) not built" >&2
fi
