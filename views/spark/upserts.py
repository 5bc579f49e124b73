"""An upsert's Spark DataFrame with only the last version of each key (``views.arrival``
does the same for Arrow batches)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as f

from ivm.errors import SchemaError
from ivm.schema import TableSchema


def latest_versions(frame: Any, table: TableSchema, sequence: str | None, context: str) -> Any:
    """A Spark DataFrame upsert with only the last row of each key: by ``sequence`` (then
    dropped), then the order of the frame's rows (``monotonically_increasing_id``)."""
    folded = {c.lower(): c for c in frame.columns}
    keys = [folded.get(k.lower(), k) for k in table.primary_key]
    if sequence is not None and sequence not in frame.columns:
        raise SchemaError(f"{context}: sequence={sequence!r} names no column of the batch")
    order = [f.col(sequence).desc_nulls_last()] if sequence is not None else []
    window = Window.partitionBy(*keys).orderBy(*order, f.col("__ivm_pos").desc())
    ranked = frame.withColumn("__ivm_pos", f.monotonically_increasing_id())
    latest = ranked.withColumn("__ivm_rank", f.row_number().over(window))
    dropped = ["__ivm_pos", "__ivm_rank", *([sequence] if sequence is not None else [])]
    return latest.where("__ivm_rank = 1").drop(*dropped)
