"""Rendering results: terminal tables and the HTML report (pure: results in, text out)."""
