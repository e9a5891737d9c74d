-- sessions from outside the workload that are doing something (sampled once a second):
-- one JSON value, an object per session (NULL: none). The workload's connections are
-- named 'pgfsbench workload' (postgres/instance.py WORKLOAD_APPLICATION), pgfsbench's own
-- 'pgfsbench...'; behind a pooler that drops application names every pooled session
-- looks like this, which the analysis allows for.
SELECT json_agg(json_build_object(
           'pid', pid, 'state', state, 'app', application_name,
           'wait', coalesce(wait_event_type || '/' || wait_event, 'CPU/running'),
           'xact_s', round(extract(epoch FROM clock_timestamp() - xact_start)::numeric, 1),
           'state_s', round(extract(epoch FROM clock_timestamp() - state_change)::numeric, 1),
           'query', left(query, 160)) ORDER BY pid)
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
  AND state IS DISTINCT FROM 'idle'
  AND application_name IS DISTINCT FROM 'pgfsbench workload'
  AND application_name NOT LIKE 'pgfsbench%'
