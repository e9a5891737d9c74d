"""Statistics over stored runs (pure: rows in, figures out)."""
