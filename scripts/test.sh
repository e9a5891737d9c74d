#!/usr/bin/env bash
# The test command: lint, type-check, then unit and functional tests (functional tests
# need root: they make loop devices, mount filesystems and start PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check
.venv/bin/mypy
exec .venv/bin/pytest "$@"
