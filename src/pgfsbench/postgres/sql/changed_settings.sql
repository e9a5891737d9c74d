-- pg_settings rows that differ from the built-in defaults, for the environment record
SELECT name, setting, unit, source, boot_val
FROM pg_settings
WHERE source NOT IN ('default', 'override')
   OR setting IS DISTINCT FROM boot_val
ORDER BY name
