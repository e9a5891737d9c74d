#!/usr/bin/env bash
# The main job: the demo matrix into pgfsbench-demo.sqlite, then pgfsbench-demo.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/pgfsbench demo "$@"
