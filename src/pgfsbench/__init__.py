"""pgfsbench: benchmark PostgreSQL across storage stacks from one spec file."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pgfsbench")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"
