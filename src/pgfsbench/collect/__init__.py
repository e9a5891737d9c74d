"""Samplers (OS, PostgreSQL, wait events, checkpoint log) and environment capture."""
