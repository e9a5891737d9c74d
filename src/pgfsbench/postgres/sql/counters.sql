-- cumulative counters sampled every second (differences make the per-second series)
SELECT extract(epoch FROM clock_timestamp())::float8 AS t,
       pg_current_wal_lsn() - '0/0'::pg_lsn AS wal_lsn,
       b.checkpoints_timed, b.checkpoints_req, b.buffers_checkpoint, b.buffers_clean,
       b.buffers_backend, b.buffers_backend_fsync, b.maxwritten_clean,
       b.checkpoint_write_time, b.checkpoint_sync_time,
       w.wal_records, w.wal_fpi, w.wal_bytes::int8 AS wal_bytes, w.wal_buffers_full,
       w.wal_write, w.wal_sync, w.wal_write_time, w.wal_sync_time,
       d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit, d.temp_bytes,
       d.tup_inserted, d.tup_updated, d.deadlocks
FROM pg_stat_bgwriter b, pg_stat_wal w,
     (SELECT sum(xact_commit)::int8 AS xact_commit, sum(xact_rollback)::int8 AS xact_rollback,
             sum(blks_read)::int8 AS blks_read, sum(blks_hit)::int8 AS blks_hit,
             sum(temp_bytes)::int8 AS temp_bytes, sum(tup_inserted)::int8 AS tup_inserted,
             sum(tup_updated)::int8 AS tup_updated, sum(deadlocks)::int8 AS deadlocks
      FROM pg_stat_database) d
