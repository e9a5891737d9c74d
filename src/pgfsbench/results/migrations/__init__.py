"""Alembic migrations of the results schema (applied by Store on open)."""
