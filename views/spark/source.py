"""The ``ivm`` Spark data source: reads a table's or view's partition files.

``spark.read.format("ivm")`` with options ``directory`` (the stage holding the
relation's trace), ``columns`` (JSON list of [name, DuckDB type]) and ``form``:

* ``rows`` (default): the relation's current contents, one row per copy, under
  its real column names; this is what ``db.dataframe(name)`` and the Spark SQL
  catalog read;
* ``zset``: live rows with their weights, positional columns (``c0``… ``__w``).

One Spark partition per partition file; files are opened read-only.

A view's backfill reads its sources' files with ``read_files_task`` instead, in ordinary
tasks: planning a query over a Python data source runs Python on the driver (a process
of its own, ≈0.3 s per query warm, seconds cold), which an epoch-like job need not pay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ivm.execution.spark.stage_task import CONTENTS_TRACE
from ivm.execution.spark.wire import arrow_schema, conform, to_wire_sql
from ivm.plan.sql import consolidate_sql, expand_sql
from ivm.schema import Column, Schema
from ivm.storage.partitions import open_partition, partition_files

TRACE = CONTENTS_TRACE


@dataclass
class FilePartition(InputPartition):
    """One partition file (empty path: the relation has no files yet)."""

    path: str


class IvmDataSource(DataSource):
    """``spark.read.format("ivm")``: ivm tables and views (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "ivm"

    def schema(self) -> str:
        raise ValueError("the ivm data source needs a schema: read it through db.dataframe(name)")

    def reader(self, schema: object) -> DataSourceReader:
        return IvmReader(dict(self.options))


class IvmReader(DataSourceReader):
    """Reads the live rows of each partition file."""

    def __init__(self, options: dict[str, str]) -> None:
        self.directory = Path(options["directory"])
        columns = json.loads(options["columns"])
        self.schema = Schema(tuple(Column(n, t) for n, t in columns))
        self.form = options.get("form", "rows")

    def partitions(self) -> list[InputPartition]:
        files = partition_files(self.directory)
        return [FilePartition(str(f)) for f in files] or [FilePartition("")]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        if not partition.path:
            return
        yield from read_partition(Path(partition.path), self.schema, self.form).to_batches()


def has_contents(con: duckdb.DuckDBPyConnection, database: str | None) -> bool:
    """True when the partition file (attached as ``database``, or opened) holds contents."""
    where = f" AND database_name = '{database}'" if database else ""
    rows = con.execute(
        f"SELECT 1 FROM duckdb_tables() WHERE table_name = '{TRACE[1:-1]}'{where}"
    ).fetchall()
    return bool(rows)


def read_files_task(
    files: list[str], schema: Schema, form: str, batches: Iterator[pa.RecordBatch],
    select: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over the numbers of ``files``: each number's file read as ``form``
    (``select``: as ``read_partition``)."""
    for batch in batches:
        for number in batch.column(0).to_pylist():  # a few file numbers per task
            yield from read_partition(Path(files[number]), schema, form, select).to_batches()


def read_partition(file: Path, schema: Schema, form: str, select: str | None = None) -> pa.Table:
    """Live rows of one partition file on the wire, as ``form`` asks (see the module).
    ``select``: the file's columns mapped to ``schema``'s (a select list over the stored
    rows, as ``ALTER TABLE`` maps a table's old columns to its new ones), the rows then
    consolidated again; None: the file holds ``schema``'s columns."""
    names = schema.names
    stored = f"SELECT {select}, __w FROM {TRACE}" if select else f"SELECT * FROM {TRACE}"
    live = consolidate_sql(stored, names, positive_only=True)
    wire = arrow_schema(schema)
    if form == "rows":
        rows = f"SELECT *, 1::BIGINT AS __w FROM ({expand_sql(live, names)}) AS r"
        sql = to_wire_sql(rows, schema)
        wire = pa.schema([pa.field(n, f.type) for n, f in zip(names, wire, strict=False)])
    else:
        sql = to_wire_sql(live, schema)
    con = open_partition(file, read_only=True)
    try:
        if not has_contents(con, None):  # a file whose first epoch never committed
            return wire.empty_table()
        table = con.sql(sql).to_arrow_table()
    finally:
        con.close()
    if form == "rows":
        table = table.drop_columns(["__w"])
    return conform(table, wire)
