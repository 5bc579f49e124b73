"""Reads of a Spark-mode session: tables and views read from their partition files.

``db.read`` and ``db.sql`` read the files on the driver with DuckDB (each file
attached read-only); ``db.dataframe`` and the Spark SQL catalog read them
through the ``ivm`` data source (``ivm.views.spark.source``), one Spark
partition per file. Each function takes the session's ``SparkEngine``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ivm.errors import SqlError
from ivm.execution.spark.spark_types import spark_struct
from ivm.plan.sql import consolidate_sql, empty_relation, expand_sql
from ivm.schema import Schema, quote
from ivm.storage.partitions import partition_files
from ivm.storage.settings import apply
from ivm.views.spark.source import TRACE, has_contents, read_files_task

if TYPE_CHECKING:
    from ivm.views.spark.engine import SparkEngine


def read(engine: SparkEngine, name: str) -> pa.Table:
    """Current contents of an existing view (or table), read from its partition files once
    the epoch in flight, if any, is over: its tasks write the files before the driver
    commits it, so a read then could see one file an epoch ahead (``views.concurrency``).
    Once its turn comes, the session may have closed, or a DDL dropped the view: checked
    again then."""
    with engine.session._lock:
        engine.session._check_open()  # its files may be another process's by now
        name = engine.session._known(name)
        con = duckdb.connect(config=engine.session._budget.duckdb_config())
        try:
            apply(con, engine.session.settings)  # the state's, as the session's connection
            attach(engine, con, [name])
            return con.sql(f"SELECT * FROM {quote(name)}").to_arrow_table()
        finally:
            con.close()


def live_sql(engine: SparkEngine, name: str) -> str:
    """The table's live rows, read from its partition files into the driver's DuckDB
    until the epoch ends (for ``views.arrival``: truncates and key-only deletes)."""
    s = engine.session
    registered = s._registered_batches.register("__ivm_live_", read(engine, name))
    return f"SELECT * FROM {registered}"


def sql(engine: SparkEngine, query: str) -> pa.Table:
    """Run a checked read-only DuckDB query over tables and views (read from their files),
    after the epoch in flight, as ``read``."""
    s = engine.session
    with s._lock:
        s._check_open()  # closed while this read waited: its files are no longer the session's
        con = duckdb.connect(config=s._budget.duckdb_config())
        try:
            apply(con, s.settings)  # the state's, as the session's own connection
            attach(engine, con, [*s._tables, *s._views])
            return con.sql(query).to_arrow_table()
        except duckdb.Error as error:
            raise SqlError(f"query failed: {error}") from error
        finally:
            con.close()


def store_directory(engine: SparkEngine, name: str) -> Path:
    """The stage whose trace holds the contents of table or view ``name``."""
    stages = engine.stages_of(name)
    stage = stages[0] if name in engine.session._tables else stages[-1]
    return engine.directory(name) / stage.name


def frame(engine: SparkEngine, name: str) -> DataFrame:
    """The contents of table or view ``name``, through the ``ivm`` data source."""
    schema = engine.session._schema_of(name)
    columns = json.dumps([[c.name, c.type] for c in schema.columns])
    return (
        engine.spark.read.format("ivm")
        .schema(spark_struct(schema, names=schema.names, weighted=False))
        .option("directory", str(store_directory(engine, name)))
        .option("columns", columns)
        .load()
    )


def live_change(engine: SparkEngine, spark: SparkSession, name: str) -> DataFrame:
    """The live rows of table or view ``name`` with their weights (wire columns), read
    from its partition files by one task per file (``read_files_task``): what a new
    view's backfill reads."""
    return files_change(spark, contents_files(engine, name), engine.session._schema_of(name))


def contents_files(engine: SparkEngine, name: str) -> list[str]:
    """The partition files holding the contents of table or view ``name`` now."""
    return [str(f) for f in partition_files(store_directory(engine, name))]


def files_change(
    spark: SparkSession, files: list[str], schema: Schema, select: str | None = None
) -> DataFrame:
    """The live rows of ``files`` (contents of ``schema``'s columns, or mapped to them by
    ``select``: ``read_partition``) with their weights, one task per file."""
    task = functools.partial(read_files_task, files, schema, "zset", select=select)
    numbers = spark.range(len(files), numPartitions=max(1, len(files)))
    return numbers.mapInArrow(task, spark_struct(schema))


def register_in_spark(engine: SparkEngine, name: str) -> None:
    """Table or view ``name`` as a temporary view of the Spark SQL catalog."""
    s = engine.session
    if name in s._tables or name in s._views:  # not dropped later in the same script
        frame(engine, name).createOrReplaceTempView(spark_name(name))


def attach(engine: SparkEngine, con: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """Views named like each relation in ``con``, over its partition files (read-only)."""
    for n, name in enumerate(names):
        schema = engine.session._schema_of(name)
        parts = []
        for k, file in enumerate(partition_files(store_directory(engine, name))):
            alias = f"__ivm_r{n}_{k}"
            path = str(file).replace("'", "''")
            con.execute(f"ATTACH '{path}' AS {alias} (READ_ONLY)").fetchall()
            if has_contents(con, alias):  # a file whose first epoch never committed
                parts.append(f"SELECT * FROM {alias}.{TRACE}")
        if parts:
            live = consolidate_sql(" UNION ALL ".join(parts), schema.names, positive_only=True)
            body = expand_sql(live, schema.names)
        else:
            body = empty_relation(schema, weighted=False)
        con.execute(f"CREATE VIEW {quote(name)} AS {body}").fetchall()


def spark_name(name: str) -> str:
    """A table or view name as Spark's catalog parses it (backquoted)."""
    return "`" + name.replace("`", "``") + "`"
