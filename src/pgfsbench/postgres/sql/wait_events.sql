-- backends waiting right now, by wait event (sampled at 10 Hz during a run)
SELECT coalesce(wait_event_type, 'CPU') || '/' || coalesce(wait_event, 'running') AS event,
       count(*) AS n
FROM pg_stat_activity
WHERE backend_type = 'client backend'
  AND state IN ('active', 'idle in transaction')
  AND pid <> pg_backend_pid()
GROUP BY 1
