-- asynchronous I/Os in flight now (PostgreSQL 18+: pg_aios), and how many are reads
SELECT count(*)::int8 AS aio_in_flight,
       count(*) FILTER (WHERE operation = 'readv')::int8 AS aio_reads_in_flight
FROM pg_aios
