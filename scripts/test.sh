#!/usr/bin/env bash
# The test command: lint, type-check, then unit and functional tests (functional tests
# need root: they make loop devices, mount filesystems and start PostgreSQL).
#
#   bash scripts/test.sh [PYTEST ARGS...]   everything (what CI runs)
#   bash scripts/test.sh --fast             the edit loop: lint, types, the Go tests, the
#                                           unit tests and a handful of functional tests
#                                           (the guard, a kill then cleanup, the trust
#                                           rules), in about two minutes here
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
    fast=1
    shift
fi
bash scripts/bootstrap.sh --with-tests
# PostgreSQL 18 for the version tests (Debian 12 has 15 only); cached after the first time
[ "$fast" = 1 ] || bash scripts/fetch-postgresql.sh 18.6.0
.venv/bin/ruff check
.venv/bin/ruff format --check
.venv/bin/mypy
# the layers and no import cycles (pyproject.toml [tool.importlinter])
.venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache
# the emulated disk's daemon: its models' arithmetic (Go); bootstrap built it
GO=$(command -v go || echo /usr/local/go/bin/go)
(cd native/diskmodel && "$GO" vet ./... && "$GO" test ./...)
# the replayer of captures: its file, its ordering of sessions (Go)
(cd native/replayer && "$GO" vet ./... && "$GO" test ./...)
if [ "$fast" = 1 ]; then
    exec .venv/bin/pytest -n 2 --dist loadscope tests/unit \
        tests/func/test_trust.py \
        "tests/func/test_pipeline.py::test_guard_refuses_a_device_with_a_filesystem" \
        "tests/func/test_pipeline.py::test_sigkill_mid_matrix_is_fully_undone_by_cleanup" \
        "$@"
fi
# Four at a time on the 2 cores (most tests wait on a run's fixed duration; a module's
# tests on one worker, the longest modules first, each worker's campaigns under a host
# lock of its own, the tests of ZFS taking turns: tests/func/conftest.py;
# PGFSBENCH_TEST_WORKERS to change it), then alone the tests marked `exclusive`: those that
# time what they measure or change host-wide settings. Status 5 is "none of the tests
# asked for is of this kind". --no-loadscope-reorder: pytest-xdist would otherwise hand
# out the modules with most tests first (the unit tests' quick ones), not the longest.
status=0
.venv/bin/pytest -n "${PGFSBENCH_TEST_WORKERS:-4}" --dist loadscope --no-loadscope-reorder \
    -m "not exclusive" "$@" || status=$?
[ "$status" = 5 ] && status=0
alone=0
.venv/bin/pytest -m exclusive "$@" || alone=$?
[ "$alone" = 5 ] && alone=0
[ "$status" = 0 ] || exit "$status"
exit "$alone"
