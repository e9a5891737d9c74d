-- who holds the heavyweight locks that backends wait for (sampled once a second): one JSON
-- value, an object per blocking process (NULL when no backend waits on a lock).
-- pg_blocking_pids() is called only for the backends that wait on a lock, so a run without
-- lock waits pays for one scan of pg_stat_activity. A prepared transaction blocks as pid 0.
SELECT json_agg(json_build_object(
           'pid', x.pid,
           'state', CASE WHEN x.pid = 0 THEN 'prepared transaction' ELSE b.state END,
           'type', b.backend_type,
           'wait', coalesce(b.wait_event_type || '/' || b.wait_event, 'CPU/running'),
           'app', b.application_name,
           'xact_s', round(extract(epoch FROM clock_timestamp() - b.xact_start)::numeric, 1),
           'state_s', round(extract(epoch FROM clock_timestamp() - b.state_change)::numeric, 1),
           'query', left(b.query, 160), 'waiters', x.waiters) ORDER BY x.waiters DESC)
FROM (SELECT bp AS pid, count(*) AS waiters
      FROM pg_stat_activity w, unnest(pg_blocking_pids(w.pid)) AS bp
      WHERE w.wait_event_type = 'Lock' AND w.pid <> pg_backend_pid()
      GROUP BY bp) x
LEFT JOIN pg_stat_activity b ON b.pid = x.pid
