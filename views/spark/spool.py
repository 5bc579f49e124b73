"""Streamed batches in Spark mode: a ``RecordBatchReader`` or DuckDB relation loaded without
holding it in the driver's memory.

Embedded mode applies a stream chunk by chunk inside one epoch (``views.loading``). In
Spark mode an epoch's batch is one Spark DataFrame, so the stream is *spooled*: read one
chunk at a time, each chunk normalized on the driver (``views.batches``: columns, types,
change format) and turned to the wire form stages read, exactly as an in-memory batch
is (``views.spark.batches.prepare``), then written as an Arrow IPC file under the state
directory (``<path>/spool/<token>/``, which the executors reach as they reach the
partition files). The batch is then a DataFrame of those files, one Spark task reading
each: the driver holds one chunk at a time, whatever the stream's size.

The spool is removed when the ingest ends, committed or not
(``views.loading.release_spooled``), and any
left by a driver that died is removed when a session opens
(``ivm.storage.partitions.stray_directories``).

Streamed this way: inserts and weighted (``__w``) or Delta change-feed rows, in
``mode="insert"``. A Debezium stream (a key-only delete or a truncate resolves against
the rows stored before the batch, which a chunk's predecessors change) and an upsert
(the last version of a key wins across the whole batch) are read whole, as before.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from pyspark.sql import DataFrame

from ivm.execution.spark.spark_types import spark_struct
from ivm.execution.spark.wire import arrow_schema, conform, to_wire_sql
from ivm.views.batches import normalize_batch
from ivm.views.batches.formats import change_format
from ivm.views.loading import CHUNK_ROWS, reader_of, table_chunks

if TYPE_CHECKING:
    from ivm.views.session import Session

SPOOL = "spool"
"""The folder of the state directory holding spooled streams."""


def spoolable(session: Session, name: str, batch: Any, mode: str) -> bool:
    """Whether table ``name``'s batch is a stream that Spark mode spools (module docstring)."""
    if mode != "insert" or not isinstance(batch, pa.RecordBatchReader | duckdb.DuckDBPyRelation):
        return False
    names = batch.schema.names if isinstance(batch, pa.RecordBatchReader) else batch.columns
    return change_format(names, session._tables[name]) != "debezium"


def spooled(session: Session, name: str, batch: Any) -> DataFrame | None:
    """Table ``name``'s streamed batch, spooled, as a DataFrame of its wire rows (None when
    it holds no rows)."""
    table, arrow = session._tables[name], session._arrow_schemas[name]
    assert session.path is not None
    directory = session.path / SPOOL / uuid.uuid4().hex
    directory.mkdir(parents=True)
    session._spooled.append(directory)
    wire = arrow_schema(table.schema)
    files: list[str] = []
    reader, _ = reader_of(batch)
    for chunk in table_chunks(reader, f"table {name!r}", CHUNK_ROWS):
        change = normalize_batch(chunk, table, arrow)
        if change.num_rows == 0:
            continue
        session._con.register("__ivm_spooled", change)
        try:
            rows = session._con.sql(to_wire_sql("SELECT * FROM __ivm_spooled", table.schema))
            part = conform(rows.to_arrow_table(), wire)
        finally:
            session._con.unregister("__ivm_spooled")
        file = directory / f"part-{len(files):05d}.arrow"
        with pa.OSFile(str(file), "wb") as sink, pa.ipc.new_file(sink, wire) as writer:
            writer.write_table(part)
        files.append(str(file))
    if not files:
        return None
    spark = session._engine._jobs.spark  # type: ignore[attr-defined]
    numbers = spark.range(len(files), numPartitions=len(files))
    return numbers.mapInArrow(functools.partial(read_spooled_task, files),
                              spark_struct(table.schema))


def read_spooled_task(files: list[str], batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
    """``mapInArrow`` over the numbers of spooled ``files``: each number's file's rows."""
    for batch in batches:
        for number in batch.column(0).to_pylist():
            with pa.OSFile(files[number]) as source:
                yield from pa.ipc.open_file(source).read_all().to_batches()

