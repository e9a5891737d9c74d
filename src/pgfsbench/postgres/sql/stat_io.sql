-- pg_stat_io (PostgreSQL 16+): reads, writes, extends and fsyncs by backend type
SELECT backend_type, object, context,
       coalesce(reads, 0) AS reads, coalesce(writes, 0) AS writes,
       coalesce(extends, 0) AS extends, coalesce(fsyncs, 0) AS fsyncs
FROM pg_stat_io
