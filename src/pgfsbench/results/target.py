"""How a results target is shown (light: the CLI imports it before any store is opened)."""

from __future__ import annotations

from pgfsbench.system.secrets import shown, shown_argv

__all__ = ["shown", "shown_argv"]
