"""Spark DataFrame batches: normalized on the executors, where their rows are.

``db.ingest`` of a Spark DataFrame checks its columns and change format on the
driver (from the schema alone) and normalizes its values in a ``mapInArrow``
task, one Arrow batch at a time, turning them into the wire form stages read.
Other batches are normalized on the driver and sent as one DataFrame (``prepare``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from ivm.execution.spark.job_session import JobSession
from ivm.execution.spark.spark_types import spark_struct
from ivm.execution.spark.tasks import TaskLabel, labeled
from ivm.execution.spark.wire import arrow_schema, conform, to_wire_sql
from ivm.schema import TableSchema
from ivm.storage.settings import apply
from ivm.views.batches import normalize_batch

if TYPE_CHECKING:
    from ivm.views.session import Session


def prepare(
    session: Session, jobs: JobSession, name: str, batch: Any, refusals: Any = None
) -> DataFrame | None:
    """Table ``name``'s batch as a normalized change on the wire, a DataFrame of ``jobs``'
    session (None when it has no rows). A Spark DataFrame's values are normalized by its
    tasks, which record a refusal in ``refusals`` (``ivm.execution.spark.refusals``)."""
    table, arrow = session._tables[name], session._arrow_schemas[name]
    struct = spark_struct(table.schema)
    if isinstance(batch, DataFrame):
        # Column names, change format and types are checked here, values on the executors.
        normalize_batch(to_arrow_schema(batch.schema).empty_table(), table, arrow)
        task = functools.partial(normalize_task, table, arrow, dict(session.settings))
        label = TaskLabel(name, False, refusals=refusals, order=-1)  # before any stage
        return jobs.adopt(batch).mapInArrow(functools.partial(labeled, label, task), struct)
    change = normalize_batch(batch, table, arrow)
    if change.num_rows == 0:
        return None
    con = session._con
    con.register("__ivm_batch", change)
    try:
        wire = con.sql(to_wire_sql("SELECT * FROM __ivm_batch", table.schema))
        wire_table = conform(wire.to_arrow_table(), arrow_schema(table.schema))
    finally:
        con.unregister("__ivm_batch")
    return jobs.spark.createDataFrame(wire_table, schema=struct)


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
