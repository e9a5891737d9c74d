"""How much room a cell's data takes: one estimate for `plan`, the workloads and `advise`
(the figures `advise` writes into a spec are the ones `plan` prints for it)."""

from __future__ import annotations

# pgbench data is about 15 MB per scale unit (pgbench-tools sizes its grid the same way),
# with indexes and free space 16 MB; WAL during the load adds as much again.
PGBENCH_BYTES_PER_SCALE = 16 * 1024 * 1024
# the data directory right after initdb, plus the WAL a load writes on top of the data
BASE_BYTES = 64 << 20
LOAD_HEADROOM = 2.0  # warn below this many times the data (the load's WAL, free space)
MIN_HEADROOM = 1.15  # refuse below this: the data alone would not fit


def room_needed(data_bytes: int, space_headroom: float = 1.0) -> int:
    """The room a cell needs for ``data_bytes`` of data: initdb's, the data, the load's WAL
    and free space, times the filesystem's own headroom (btrfs: 1.5)."""
    return int(BASE_BYTES + data_bytes * LOAD_HEADROOM * space_headroom)
