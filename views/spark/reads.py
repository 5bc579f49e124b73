"""Reads of a Spark-mode session: tables and views read from their partition files.

``db.read`` and ``db.sql`` read the files on the driver with DuckDB (each file
attached read-only); ``db.dataframe`` and the Spark SQL catalog read them
through the ``ivm`` data source (``ivm.views.spark.source``), one Spark
partition per file.
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
from ivm.views.read_queries import check_read_query
from ivm.views.spark.source import TRACE, has_contents, read_files_task

if TYPE_CHECKING:
    from ivm.views.spark.session import SparkModeSession

    _Base = SparkModeSession
else:
    _Base = object


class SparkReads(_Base):
    """The reading half of ``SparkModeSession``."""

    def read(self, name: str) -> pa.Table:
        """Current contents of a view (or table), read from its partition files."""
        self._check_open()
        name = self._known(name)
        con = duckdb.connect()
        try:
            apply(con, self.settings)  # the state's, as the session's own connection
            self._attach(con, [name])
            return con.sql(f"SELECT * FROM {quote(name)}").to_arrow_table()
        finally:
            con.close()

    def _live_sql(self, name: str) -> str:
        """The table's live rows, read from its partition files into the driver's DuckDB
        until the epoch ends (for ``views.arrival``: truncates and key-only deletes)."""
        registered = f"__ivm_live_{len(self._registered_batches)}"
        self._con.register(registered, self.read(name))
        self._registered_batches.append(registered)
        return f"SELECT * FROM {registered}"

    def sql(self, query: str) -> pa.Table:
        """Run a read-only DuckDB query over tables and views (read from their files)."""
        self._check_open()
        check_read_query(query)
        con = duckdb.connect()
        try:
            apply(con, self.settings)  # the state's, as the session's own connection
            self._attach(con, [*self._tables, *self._views])
            return con.sql(query).to_arrow_table()
        except duckdb.Error as error:
            raise SqlError(f"query failed: {error}") from error
        finally:
            con.close()

    def dataframe(self, name: str) -> DataFrame:
        """The current contents of a table or view as a Spark DataFrame (read when used)."""
        self._check_open()
        return self._frame(self._known(name))

    # -- helpers -----------------------------------------------------------------------------

    def _store_directory(self, name: str) -> Path:
        """The stage whose trace holds the contents of table or view ``name``."""
        stages = self._stages_of(name)
        return self._directory(name) / (stages[0] if name in self._tables else stages[-1]).name

    def _schema_of(self, name: str) -> Schema:
        return self._tables[name].schema if name in self._tables else self._views[name].schema

    def _frame(self, name: str) -> DataFrame:
        """The contents of table or view ``name``, through the ``ivm`` data source."""
        schema = self._schema_of(name)
        columns = json.dumps([[c.name, c.type] for c in schema.columns])
        return (
            self.spark.read.format("ivm")
            .schema(spark_struct(schema, names=schema.names, weighted=False))
            .option("directory", str(self._store_directory(name)))
            .option("columns", columns)
            .load()
        )

    def _live_change(self, spark: SparkSession, name: str) -> DataFrame:
        """The live rows of table or view ``name`` with their weights (wire columns), read
        from its partition files by one task per file (``read_files_task``): what a new
        view's backfill reads."""
        files = [str(f) for f in partition_files(self._store_directory(name))]
        schema = self._schema_of(name)
        read = functools.partial(read_files_task, files, schema, "zset")
        numbers = spark.range(len(files), numPartitions=max(1, len(files)))
        return numbers.mapInArrow(read, spark_struct(schema))

    def _register_in_spark(self, name: str) -> None:
        if name in self._tables or name in self._views:  # not dropped later in the same script
            self._frame(name).createOrReplaceTempView(spark_name(name))

    def _attach(self, con: duckdb.DuckDBPyConnection, names: list[str]) -> None:
        """Views named like each relation in ``con``, over its partition files (read-only)."""
        for n, name in enumerate(names):
            schema = self._schema_of(name)
            parts = []
            for k, file in enumerate(partition_files(self._store_directory(name))):
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
