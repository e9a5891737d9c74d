-- pg_settings rows that differ from the built-in defaults, for the environment record,
-- and the storage-relevant ones always (so runs of different versions compare)
SELECT name, setting, unit, source, boot_val
FROM pg_settings
WHERE source NOT IN ('default', 'override')
   OR setting IS DISTINCT FROM boot_val
   OR name IN ('io_method', 'io_workers', 'io_combine_limit', 'effective_io_concurrency',
               'full_page_writes', 'wal_init_zero', 'wal_recycle', 'data_checksums',
               'wal_segment_size', 'wal_sync_method', 'shared_buffers')
ORDER BY name
