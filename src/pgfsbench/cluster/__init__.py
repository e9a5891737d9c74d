"""Kubernetes: a cluster as a place to run (spec/cluster.py says what a spec may ask)."""
