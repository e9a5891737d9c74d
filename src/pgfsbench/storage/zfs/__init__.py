"""ZFS: pools, datasets, properties and module parameters, on OpenZFS or zfs-fuse.

Which ZFS is present is detected (kernel module and its version, or the zfs-fuse daemon
and its pool version), and so are the properties and values it accepts, from `zfs get`'s
own property table (capabilities). A spec asking for something the installed ZFS cannot do
is refused before anything is created (driver). Results from a FUSE pool are marked as such
everywhere. The command lines are pure (layout); the daemon of zfs-fuse is its own module
(fuse), and so are the commands run on pools (commands).

pgfsbench only ever destroys pools it created: names are unique (`pgfsb_...`), the
destroy is journaled, and an existing pool with the same name is refused.
"""

from __future__ import annotations

from pgfsbench.storage.zfs.capabilities import (
    MODULE_DIR,
    PropertySupport,
    ZfsImplementation,
    check_properties,
    detect,
    kernel_zfs_present,
    parse_property_table,
    resolve_value,
    resolved_properties,
)
from pgfsbench.storage.zfs.commands import (
    arc_bytes,
    dataset_properties,
    evict_pool_cache,
    existing_pools,
    sync_txg,
)
from pgfsbench.storage.zfs.driver import DRIVER, ZfsDriver
from pgfsbench.storage.zfs.fuse import (
    FUSE_PARAMETERS,
    FuseDaemon,
    fuse_daemon_options,
    fuse_daemon_running,
)
from pgfsbench.storage.zfs.layout import POOL_PREFIX, zfs_create_argv, zpool_create_argv

__all__ = [
    "DRIVER",
    "FUSE_PARAMETERS",
    "MODULE_DIR",
    "POOL_PREFIX",
    "FuseDaemon",
    "PropertySupport",
    "ZfsDriver",
    "ZfsImplementation",
    "arc_bytes",
    "check_properties",
    "dataset_properties",
    "detect",
    "evict_pool_cache",
    "existing_pools",
    "fuse_daemon_options",
    "fuse_daemon_running",
    "kernel_zfs_present",
    "parse_property_table",
    "resolve_value",
    "resolved_properties",
    "sync_txg",
    "zfs_create_argv",
    "zpool_create_argv",
]
