-- cumulative counters sampled every second, PostgreSQL 18+: WAL writes and syncs moved
-- from pg_stat_wal to pg_stat_io (object 'wal'; times in ms when track_wal_io_timing)
SELECT extract(epoch FROM clock_timestamp())::float8 AS t,
       pg_current_wal_lsn() - '0/0'::pg_lsn AS wal_lsn,
       c.num_timed AS checkpoints_timed, c.num_requested AS checkpoints_req,
       c.buffers_written AS buffers_checkpoint, b.buffers_clean,
       NULL::int8 AS buffers_backend, NULL::int8 AS buffers_backend_fsync, b.maxwritten_clean,
       c.write_time AS checkpoint_write_time, c.sync_time AS checkpoint_sync_time,
       w.wal_records, w.wal_fpi, w.wal_bytes::int8 AS wal_bytes, w.wal_buffers_full,
       io.wal_write, io.wal_sync, io.wal_write_time, io.wal_sync_time,
       d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit, d.temp_bytes,
       d.tup_inserted, d.tup_updated, d.deadlocks
FROM pg_stat_checkpointer c, pg_stat_bgwriter b, pg_stat_wal w,
     (SELECT sum(writes)::int8 AS wal_write, sum(fsyncs)::int8 AS wal_sync,
             sum(write_time)::float8 AS wal_write_time, sum(fsync_time)::float8 AS wal_sync_time
      FROM pg_stat_io WHERE object = 'wal') io,
     (SELECT sum(xact_commit)::int8 AS xact_commit, sum(xact_rollback)::int8 AS xact_rollback,
             sum(blks_read)::int8 AS blks_read, sum(blks_hit)::int8 AS blks_hit,
             sum(temp_bytes)::int8 AS temp_bytes, sum(tup_inserted)::int8 AS tup_inserted,
             sum(tup_updated)::int8 AS tup_updated, sum(deadlocks)::int8 AS deadlocks
      FROM pg_stat_database) d
