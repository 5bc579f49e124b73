"""Sinks for ``db.subscribe``: each epoch's delta written as Parquet files or to a Delta
Lake table (``ivm.views.sinks`` says how each writes, idempotently)."""

from __future__ import annotations

from ivm.views.sinks import DeltaSink, ParquetSink

__all__ = ["DeltaSink", "ParquetSink"]
