"""ivm.stage_task: one stage applied to one partition file for one epoch (no Spark).

Stages come from the real planner, ``binary_joins``, ``incrementalize`` and
``ivm.stages``; their input is the *wide* Arrow table a Spark task receives.
Results are checked against DuckDB recomputing the view's SQL over the
accumulated base rows, and against a partition that never saw the rolled-back
attempt.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from sqlglot import exp

from ivm.binary_joins import binary_joins
from ivm.circuit import DeltaJoin, IncrementalAggregate
from ivm.errors import ConstraintError
from ivm.executor import describe
from ivm.incrementalize import incrementalize
from ivm.plan import Project
from ivm.schema import WEIGHT, Column, Schema, TableSchema, quote
from ivm.stage_task import CONTENTS_TRACE, Ticket, apply_partition, wide_columns
from ivm.stages import Stage, table_stage, view_stages
from ivm.wire import arrow_schema, from_wire_sql
from sql_frontend.planner import plan_query
from storage.partitions import META, partition_file

BASE = {"t": "g VARCHAR, v INTEGER", "u": "id INTEGER, name VARCHAR"}
ITEMS = TableSchema(
    "items", Schema((Column("id", "INTEGER"), Column("name", "VARCHAR"))), primary_key=("id",)
)
BAG = TableSchema("bag", Schema((Column("k", "VARCHAR"), Column("n", "BIGINT"))))
GROUPED = (
    "SELECT g, SUM(v) AS s, COUNT(*) AS n, COUNT(v) AS nv, MIN(v) AS lo, MAX(v) AS hi "
    "FROM t GROUP BY g"
)
GLOBAL = "SELECT COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM t"
JOINED = "SELECT t.g, t.v, u.id, u.name FROM t JOIN u ON t.v = u.id"

Row = tuple  # column values, then the weight


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    for name, columns in BASE.items():
        connection.execute(f"CREATE TABLE {name} ({columns})")
    yield connection
    connection.close()


def stages_of(con: duckdb.DuckDBPyConnection, sql: str) -> list[Stage]:
    relations = {n: describe(con, f"SELECT * FROM {n}") for n in BASE}
    plan = plan_query(sql, relations, lambda text: describe(con, text))
    return view_stages(incrementalize(binary_joins(plan), "v"))


def wide(stage: Stage, rows: Sequence[tuple[int, Row]]) -> pa.Table:
    """The wide input of ``stage``: ``(input index, (values..., weight))`` per row."""
    columns: dict[str, tuple[pa.DataType, list]] = {
        "__i": (pa.int32(), [i for i, _ in rows]),
        "__p": (pa.int32(), [0] * len(rows)),
    }
    for index, stage_input in enumerate(stage.inputs):
        types = arrow_schema(stage_input.schema).types
        for j, name in enumerate(wide_columns(stage, index)):
            values = [row[j] if i == index else None for i, row in rows]
            columns[name] = (types[j], values)
    columns[WEIGHT] = (pa.int64(), [row[-1] for _, row in rows])
    return pa.table({name: pa.array(values, type=t) for name, (t, values) in columns.items()})


def changes(con: duckdb.DuckDBPyConnection, stage: Stage, output: pa.Table) -> Counter:
    """A stage's output (wire) as a Z-set with DuckDB values: row -> weight."""
    assert output.schema == arrow_schema(stage.output)
    con.register("__out", output)
    try:
        rows = con.execute(from_wire_sql("SELECT * FROM __out", stage.output)).fetchall()
    finally:
        con.unregister("__out")
    result: Counter = Counter()
    for row in rows:
        result[row[:-1]] += row[-1]
    return result


def run(
    con: duckdb.DuckDBPyConnection,
    stage: Stage,
    directory: Path,
    ticket: Ticket,
    rows: Sequence[tuple[int, Row]],
) -> Counter:
    """Apply ``rows`` to partition 0 of ``stage``; its output change as a Z-set."""
    return changes(con, stage, apply_partition(stage, directory, 0, ticket, wide(stage, rows)))


def ticket(epoch: int, token: str | None = None, **options: bool) -> Ticket:
    return Ticket(epoch=epoch, committed=epoch - 1, token=token or f"e{epoch}", **options)


def file_tables(directory: Path) -> dict[str, list[tuple]]:
    """Every table of partition 0 with its raw rows (sorted): the file's whole state."""
    reader = duckdb.connect(str(partition_file(directory, 0)), read_only=True)
    try:
        names = [r[0] for r in reader.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {
            n: sorted(reader.execute(f"SELECT * FROM {quote(n)}").fetchall(), key=repr)
            for n in sorted(names)
        }
    finally:
        reader.close()


def zset(weights: Counter) -> Counter:
    """``weights`` without zeros (Counter's ``+`` would drop negative weights too)."""
    return Counter({row: w for row, w in weights.items() if w})


def consolidated(rows: list[tuple]) -> Counter:
    result: Counter = Counter()
    for row in rows:
        result[row[:-1]] += row[-1]
    return zset(result)


BOOKKEEPING = ("__ivm_undo", "__ivm_partition", "__ivm_out", "__ivm_tails")


def traces_of(tables: dict[str, list[tuple]]) -> dict[str, Counter]:
    """Every trace among a file's ``tables``, consolidated (bookkeeping left out)."""
    return {
        name: consolidated(rows)
        for name, rows in tables.items()
        if name.startswith("__ivm_") and not name.startswith(BOOKKEEPING)
    }


CONTENTS = CONTENTS_TRACE.strip('"')


def state(directory: Path) -> tuple[tuple, Counter]:
    """The partition's (epoch, previous, token) and its stored contents."""
    tables = file_tables(directory)
    return tables[META][0], traces_of(tables)[CONTENTS]


def base_columns(stage: Stage) -> list[list[str]]:
    """For each stage input, the base-table column each of its columns carries."""
    assert stage.circuit is not None
    result = []
    for index, source in enumerate(stage.circuit.operators[: len(stage.inputs)]):
        reader = next(op for op in stage.circuit.operators if source in op.inputs)
        node = reader.node
        upstream = node.relations[index] if isinstance(reader, DeltaJoin) else node.input
        names = []
        for name in stage.inputs[index].schema.names:
            if isinstance(upstream, Project):
                expression = dict(upstream.exprs)[name]
                assert isinstance(expression, exp.Column), expression
                name = expression.name
            names.append(name.split(".", 1)[-1])
        result.append(names)
    return result


def stage_rows(stage: Stage, index: int, table: str, batch: Counter) -> list[tuple[int, Row]]:
    """A base-table batch (row of ``BASE[table]`` -> weight) as rows of stage input ``index``."""
    order = [c.split()[0] for c in BASE[table].split(", ")]
    picks = [order.index(name) for name in base_columns(stage)[index]]
    return [(index, (*(row[p] for p in picks), w)) for row, w in batch.items() if w]


def recompute(con: duckdb.DuckDBPyConnection, sql: str, tables: dict[str, Counter]) -> Counter:
    """The view ``sql`` computed by DuckDB over the given base-table contents.

    (The planner only describes the tables of ``con``; their rows do not matter to it.)
    """
    for name in BASE:
        con.execute(f"DELETE FROM {name}")
        rows = [row for row, w in tables.get(name, Counter()).items() for _ in range(w)]
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
    return Counter(con.execute(sql).fetchall())


#BODY
