"""The doctor (reads a live host, judges it by rules kept as data) and advise (a spec
that measures the advice on the same kind of storage)."""
