"""ivm.operators.set_operation beside its non-incremental meaning.

Each set operation runs epoch by epoch through the embedded executor on random
changes to both inputs at once (duplicates, NULL rows, deletes, counts crossing
zero on either side); after every epoch its integral must equal DuckDB's own
INTERSECT / EXCEPT [ALL] over the inputs' integrals, and the change it emitted
must be exactly the difference: ``change = f(inputs after) − f(inputs before)``.
"""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest

from ivm.circuit.circuit import Circuit
from ivm.execution.embedded import EpochRunner, create_traces
from ivm.operators.scan import Scan, Source
from ivm.operators.set_operation import (
    MULTIPLICITIES,
    IncrementalSetOperation,
    SetOperation,
)
from ivm.plan.sql import W
from ivm.schema import Column, Schema
from ivm.storage.naming import TableNames
from ivm.storage.traces import create_trace

SCHEMA = Schema((Column("k", "INTEGER"), Column("v", "VARCHAR")))
COLUMNS = [("k", "INTEGER"), ("v", "VARCHAR")]


def bag_of(names: TableNames, table: str) -> str:
    """An input's integral as a bag (one row per live copy)."""
    live = (
        f"SELECT k, v, SUM({W})::BIGINT AS n FROM {names.relation_trace(table)} GROUP BY ALL "
        f"HAVING SUM({W}) > 0"
    )
    return f"SELECT k, v FROM ({live}) AS l, range(l.n)"


def rows(con: duckdb.DuckDBPyConnection, sql: str, weighted: bool = False) -> Counter:
    found = con.execute(sql).fetchall()
    if weighted:
        return Counter({r[:-1]: r[-1] for r in found})
    return Counter(found)


def literal(value: object) -> str:
    return "NULL" if value is None else repr(value)


@pytest.mark.parametrize("operation", list(MULTIPLICITIES))
@pytest.mark.parametrize("seed", range(3))
def test_change_is_the_difference_of_the_operation_over_the_integrals(
    operation: str, seed: int
) -> None:
    rng = random.Random(seed)
    con = duckdb.connect()
    names = TableNames()
    scans = [Scan(schema=SCHEMA, name=t) for t in ("l", "r")]
    for table in ("l", "r"):
        create_trace(con, names.relation_trace(table), COLUMNS)
    node = SetOperation(schema=SCHEMA, left=scans[0], right=scans[1], operation=operation)
    op = IncrementalSetOperation(node, tuple(Source(s, ()) for s in scans))
    circuit = Circuit.of("v", op)
    create_traces(con, names, circuit)
    live = {"l": Counter(), "r": Counter()}
    meaning = f"SELECT * FROM ({{l}}) AS a {operation} SELECT * FROM ({{r}}) AS b"
    for _ in range(14):
        deltas = {}
        for table in ("l", "r"):
            change: Counter = Counter()
            for _ in range(rng.randint(0, 5)):
                row = (rng.choice([1, 2, None]), rng.choice(["x", None]))
                if live[table][row] + change[row] > 0 and rng.random() < 0.45:
                    change[row] -= rng.choice([1, live[table][row] + change[row]])
                else:
                    change[row] += rng.choice([1, 1, 3])
            values = ", ".join(
                f"({literal(k)}, {literal(v)}, {w})" for (k, v), w in change.items() if w
            )
            deltas[table] = (
                f"SELECT * FROM (VALUES {values}) AS d(k, v, {W})" if values else None
            )
            live[table].update(change)
        if not any(deltas.values()):
            continue
        for table, delta in deltas.items():
            if delta is not None:
                con.execute(f"CREATE OR REPLACE TEMP TABLE delta_{table} AS {delta}")
        plain = meaning.format(l=bag_of(names, "l"), r=bag_of(names, "r"))
        before = rows(con, plain)
        sources = {t: f"SELECT * FROM delta_{t}" for t, d in deltas.items() if d is not None}
        runner = EpochRunner(con, names, sources)
        emitted = rows(con, runner.run(circuit) or "SELECT 1, 1, 0 WHERE false", weighted=True)
        for table, committed in runner.commits:
            con.execute(f"INSERT INTO {table} {committed}")
        for table in sources:
            con.execute(f"INSERT INTO {names.relation_trace(table)} SELECT * FROM delta_{table}")
        after = rows(con, plain)
        expected = Counter(after)
        expected.subtract(before)
        assert {r: w for r, w in emitted.items() if w} == {r: w for r, w in expected.items() if w}
        integral = rows(con, runner.integral(op), weighted=True)
        assert {r: w for r, w in integral.items() if w} == dict(after)
