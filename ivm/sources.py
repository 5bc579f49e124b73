"""Sources: a Delta Lake table's change data feed as batches, and followed into a session
exactly once (``ivm.views.sources`` says how)."""

from __future__ import annotations

from ivm.views.sources import delta_changes, follow_delta

__all__ = ["delta_changes", "follow_delta"]
