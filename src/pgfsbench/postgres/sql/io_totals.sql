-- pg_stat_io (16+) summed over backend types and contexts, relations only, every second
SELECT coalesce(sum(reads), 0)::int8 AS io_reads, coalesce(sum(writes), 0)::int8 AS io_writes,
       coalesce(sum(writebacks), 0)::int8 AS io_writebacks,
       coalesce(sum(extends), 0)::int8 AS io_extends,
       coalesce(sum(fsyncs), 0)::int8 AS io_fsyncs
FROM pg_stat_io WHERE object = 'relation'
