"""Kubernetes, the pure and low parts: manifests, the rules a cell must meet in a pod, the
thin client (a fake for unit tests), the bundle a pod answers with, the undo actions and
the pod's own entry point. The campaign that runs cells there is `cluster/` (a place of
the engine); everything here sits below the engine, plan, cleanup and report."""
