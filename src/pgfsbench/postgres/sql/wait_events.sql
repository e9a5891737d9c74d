-- backends waiting right now, by wait event (sampled at 10 Hz during a run): one text
-- value, a line "count event" per event (NULL: none), read as it comes and parsed after
-- the run, so a tick's work stays small (collect/samplers.py, parse_waits)
SELECT string_agg(n || ' ' || event, E'\n' ORDER BY event)
FROM (SELECT coalesce(wait_event_type, 'CPU') || '/' || coalesce(wait_event, 'running')
             AS event,
             count(*) AS n
      FROM pg_stat_activity
      WHERE backend_type = 'client backend'
        AND state IN ('active', 'idle in transaction')
        AND pid <> pg_backend_pid()
      GROUP BY 1) w
