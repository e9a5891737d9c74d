#!/usr/bin/env bash
# Builds pgfsbench's pod image, and the pause image of the test cluster, as OCI archives
# with no registry and no container engine: a Debian 12 root filesystem from mmdebstrap
# (PostgreSQL 15, pgbench, sysbench, fio, Python 3.11), pgfsbench and its locked
# dependencies in /opt/pgfsbench, written as a one-layer OCI archive by oci_archive.py.
# The same image as scripts/k8s/Containerfile builds with a container engine.
#
#   scripts/k8s/build-image.sh [CACHE_DIR]   (default /var/cache/pgfsbench-k8s)
#
# Prints the archives' paths and the image names on its last lines (KEY=VALUE), for
# scripts/test-k8s.sh. The Debian root filesystem is cached by its package list; the
# pgfsbench layer is rebuilt when the wheel changes.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
CACHE=${1:-/var/cache/pgfsbench-k8s}
IMAGES="$CACHE/images"
mkdir -p "$IMAGES"
chmod 0700 "$CACHE"

PACKAGES=postgresql-15,postgresql-contrib,pgbouncer,sysbench,fio,python3,procps,util-linux,e2fsprogs,xfsprogs,ca-certificates
# the postgres user has uid and gid 999 ([kubernetes] run_as_user's default: pods run as it,
# not root), made before the packages that would pick another
POSTGRES_ID=999
base="$IMAGES/debian-bookworm-$(printf '%s uid %s' "$PACKAGES" "$POSTGRES_ID" | sha256sum | cut -c1-12).tar"
if [ ! -s "$base" ]; then
    command -v mmdebstrap >/dev/null || { echo "build-image: mmdebstrap is needed (apt-get install mmdebstrap)" >&2; exit 1; }
    start=$(date +%s)
    # No cluster created by the package (pgfsbench makes its own), no service started.
    mmdebstrap --variant=minbase --format=tar --include="$PACKAGES" --quiet \
        --essential-hook='mkdir -p "$1/etc/postgresql-common" && echo "create_main_cluster = false" > "$1/etc/postgresql-common/createcluster.conf"' \
        --essential-hook="echo postgres:x:$POSTGRES_ID: >> \"\$1/etc/group\" && echo 'postgres:x:$POSTGRES_ID:$POSTGRES_ID:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash' >> \"\$1/etc/passwd\"" \
        --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
        bookworm "$base.partial" http://deb.debian.org/debian
    mv "$base.partial" "$base"
    echo "build-image: Debian root filesystem in $(( $(date +%s) - start )) s"
fi

# the wheel and the locked requirements (what .venv has, without the dev group)
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT
uv build --wheel --quiet --out-dir "$dist" >/dev/null
uv export --frozen --no-dev --no-hashes --no-emit-project --quiet > "$dist/requirements.txt"
version=$(cd "$dist" && ls pgfsbench-*.whl | sed -E 's/pgfsbench-([^-]+)-.*/\1/')
tag="$version-$(cat "$dist"/*.whl "$dist/requirements.txt" "$base" | sha256sum | cut -c1-12)"
name="pgfsbench.local/pgfsbench:$tag"
archive="$IMAGES/pgfsbench-$tag.oci.tar"
if [ ! -s "$archive" ]; then
    start=$(date +%s)
    root="$dist/rootfs"
    mkdir "$root"
    tar -C "$root" -xf "$base"
    # the venv's python is the image's /usr/bin/python3.11 (the same Debian 12 as here)
    uv venv --quiet --python /usr/bin/python3.11 "$root/opt/pgfsbench"
    uv pip install --quiet --python "$root/opt/pgfsbench/bin/python" -r "$dist/requirements.txt" "$dist"/pgfsbench-*.whl
    # scripts carry the venv's path as built here: make it the image's
    grep -rlI --null "$root/opt/pgfsbench" "$root/opt/pgfsbench/bin" | xargs -0 -r sed -i "s#$root/opt/pgfsbench#/opt/pgfsbench#g"
    sed -i "s#$root##g" "$root/opt/pgfsbench/pyvenv.cfg"
    ln -sf /opt/pgfsbench/bin/pgfsbench "$root/usr/local/bin/pgfsbench"
    # the pods' own directories (kube/manifests.pod_home): root's is made by root, the
    # postgres user's is its alone (a pod not privileged runs as it)
    install -d -m 0755 -o 0 -g 0 "$root/var/lib/pgfsbench"
    install -d -m 0700 -o "$POSTGRES_ID" -g "$POSTGRES_ID" "$root/var/lib/pgfsbench/$POSTGRES_ID"
    "$root/opt/pgfsbench/bin/python" -m compileall -q -j 0 "$root/opt/pgfsbench/lib" >/dev/null || true
    tar -C "$root" --numeric-owner -cf "$dist/rootfs.tar" .
    digest=$(python3 "$REPO/scripts/k8s/oci_archive.py" "$dist/rootfs.tar" "$name" "$archive.new" \
             --entrypoint /usr/local/bin/pgfsbench)
    mv "$archive.new" "$archive"
    echo "$digest" > "$archive.digest"
    echo "build-image: $name in $(( $(date +%s) - start )) s"
fi

# root filesystems of other package lists go, and older pgfsbench images (one per
# source change): the two newest are kept
for old in "$IMAGES"/debian-bookworm-*.tar; do
    [ "$old" = "$base" ] || rm -f "$old"
done
ls -1t "$IMAGES"/pgfsbench-*.oci.tar 2>/dev/null | tail -n +3 | while read -r old; do
    rm -f "$old" "$old.digest"
done

# pause: a static Go binary alone in its image
pause_archive="$IMAGES/pause.oci.tar"
pause_name="registry.k8s.io/pause:3.10"
if [ ! -s "$pause_archive" ]; then
    proot="$dist/pause-root"
    mkdir -p "$proot"
    (cd "$REPO/scripts/k8s/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$proot/pause" .)
    tar -C "$proot" --numeric-owner --owner=0 --group=0 -cf "$dist/pause.tar" pause
    python3 "$REPO/scripts/k8s/oci_archive.py" "$dist/pause.tar" "$pause_name" "$pause_archive" \
        --entrypoint /pause > "$pause_archive.digest"
fi
echo "IMAGE=$name"
echo "IMAGE_ARCHIVE=$archive"
echo "IMAGE_DIGEST=$(cat "$archive.digest")"
echo "PAUSE_IMAGE=$pause_name"
echo "PAUSE_ARCHIVE=$pause_archive"
