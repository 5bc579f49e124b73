"""Spark DataFrame batches: normalized on the executors, where their rows are.

``db.ingest`` of a Spark DataFrame checks its columns and change format on the
driver (from the schema alone) and normalizes its values in a ``mapInArrow``
task, one Arrow batch at a time, turning them into the wire form stages read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb
import pyarrow as pa

from ivm.execution.spark.wire import arrow_schema, conform, to_wire_sql
from ivm.schema import TableSchema
from ivm.storage.settings import apply
from ivm.views.batches import normalize_batch


def normalize_task(
    table: TableSchema, arrow: pa.Schema, settings: Mapping[str, str], batches: Any
) -> Any:
    """Executor side of a Spark DataFrame batch: normalize each Arrow batch, then to the wire
    (under the DuckDB ``settings`` the state evaluates under, whatever the executor's ``TZ``)."""
    con = duckdb.connect()
    wire = arrow_schema(table.schema)
    try:
        apply(con, settings)
        for batch in batches:
            change = normalize_batch(pa.Table.from_batches([batch]), table, arrow)
            if change.num_rows == 0:
                continue
            con.register("__ivm_batch", change)
            result = con.sql(to_wire_sql("SELECT * FROM __ivm_batch", table.schema))
            yield from conform(result.to_arrow_table(), wire).to_batches()
            con.unregister("__ivm_batch")
    finally:
        con.close()
