"""PostgreSQL instances: binaries, initdb, configuration, start and stop."""
