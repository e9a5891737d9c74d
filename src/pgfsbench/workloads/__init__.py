"""Load generators: argv builders and output parsers (pure)."""
