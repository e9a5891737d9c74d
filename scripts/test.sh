#!/usr/bin/env bash
# The test command: lint, type-check, then unit and functional tests (functional tests
# need root: they make loop devices, mount filesystems and start PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --with-tests
# PostgreSQL 18 for the version tests (Debian 12 has 15 only); cached after the first time
bash scripts/fetch-postgresql.sh 18.6.0
.venv/bin/ruff check
.venv/bin/ruff format --check
.venv/bin/mypy
# the emulated disk's daemon: its models' arithmetic (Go); bootstrap built it
GO=$(command -v go || echo /usr/local/go/bin/go)
(cd native/diskmodel && "$GO" vet ./... && "$GO" test ./...)
exec .venv/bin/pytest "$@"
