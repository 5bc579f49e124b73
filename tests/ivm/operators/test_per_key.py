"""ivm.operators.per_key: the general per-key operator, beside its non-incremental meaning.

A toy user of the operator, "the two largest values of each key" (several rows
per key, as top-k and windows will emit), runs epoch by epoch through the
embedded executor on random changes (inserts, deletes, duplicates, NULL keys,
keys emptied); after every epoch its integral must equal f applied to the
input's integral, and the change it emitted must be exactly the difference:
``change = f(integral after) − f(integral before)``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import duckdb
import pytest

from ivm.circuit.circuit import Circuit
from ivm.execution.embedded import EpochRunner, create_traces
from ivm.operators.per_key import PerKey
from ivm.operators.scan import Scan, Source
from ivm.plan.node import Plan
from ivm.plan.sql import W
from ivm.schema import Column, Schema
from ivm.storage.naming import TableNames
from ivm.storage.traces import create_trace

SCHEMA = Schema((Column("k", "INTEGER"), Column("v", "INTEGER")))
TOP_TWO = (
    "SELECT k, v FROM (SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v DESC NULLS "
    "LAST) AS r FROM ({rows}) AS x) AS y WHERE r <= 2"
)


@dataclass(frozen=True, eq=False)
class TopTwoNode(Plan):
    """The two largest values of each key (the test's plan node)."""

    input: Plan

    def plain(self, inputs: list[str]) -> str:  # type: ignore[override]
        return TOP_TWO.format(rows=inputs[0])


@dataclass(frozen=True, eq=False)
class TopTwo(PerKey):
    """The per-key operator computing ``TopTwoNode``: up to two rows per key."""

    kind = "top_two"

    @property
    def keys(self) -> tuple[str, ...]:
        return ("k",)

    def group_sql(self, live: str) -> str:
        expanded = f"SELECT k, v FROM ({live}) AS l, range(l.{W})"
        return f"SELECT k, v, 1::BIGINT AS {W} FROM ({TOP_TWO.format(rows=expanded)}) AS t"


def rows_of(names: TableNames) -> str:
    """The input's integral as a bag (one row per live copy)."""
    live = (
        f"SELECT k, v, SUM({W})::BIGINT AS n FROM {names.relation_trace('t')} GROUP BY ALL "
        "HAVING SUM(__w) > 0"
    )
    return f"SELECT k, v FROM ({live}) AS l, range(l.n)"


def bag(con: duckdb.DuckDBPyConnection, sql: str, weighted: bool = False) -> Counter:
    rows = con.execute(sql).fetchall()
    if weighted:
        return Counter({r[:-1]: r[-1] for r in rows})
    return Counter(rows)


@pytest.mark.parametrize("seed", range(6))
def test_per_key_change_is_the_difference_of_f_over_the_integrals(seed: int) -> None:
    rng = random.Random(seed)
    con = duckdb.connect()
    names = TableNames()
    create_trace(con, names.relation_trace("t"), [("k", "INTEGER"), ("v", "INTEGER")])
    scan = Scan(schema=SCHEMA, name="t")
    op = TopTwo(TopTwoNode(schema=SCHEMA, input=scan), (Source(scan, ()),))
    circuit = Circuit.of("v", op)
    create_traces(con, names, circuit)
    live: Counter = Counter()
    for _ in range(12):
        change: Counter = Counter()
        for _ in range(rng.randint(1, 6)):
            row = (rng.choice([1, 2, 3, None]), rng.choice([1, 2, 3, 4, None]))
            if live[row] + change[row] > 0 and rng.random() < 0.45:
                change[row] -= 1
            else:
                change[row] += rng.choice([1, 1, 2])
        if rng.random() < 0.15:  # a key emptied
            key = rng.choice([1, 2, 3])
            for row, count in live.items():
                if row[0] == key:
                    change[row] = -count
        values = ", ".join(
            f"({'NULL' if k is None else k}, {'NULL' if v is None else v}, {w})"
            for (k, v), w in change.items()
            if w
        )
        if not values:
            continue
        con.execute(f"CREATE OR REPLACE TEMP TABLE delta AS SELECT * FROM (VALUES {values}) "
                    f"AS d(k, v, {W})")
        before = bag(con, TOP_TWO.format(rows=rows_of(names)))
        runner = EpochRunner(con, names, {"t": "SELECT * FROM delta"})
        emitted = bag(con, runner.run(circuit) or "SELECT 1, 1, 0 WHERE false", weighted=True)
        for table, rows in runner.commits:
            con.execute(f"INSERT INTO {table} {rows}")
        con.execute(f"INSERT INTO {names.relation_trace('t')} SELECT * FROM delta")
        live.update(change)
        after = bag(con, TOP_TWO.format(rows=rows_of(names)))
        expected = Counter(after)
        expected.subtract(before)
        assert {r: w for r, w in emitted.items() if w} == {r: w for r, w in expected.items() if w}
        integral = bag(con, runner.integral(op), weighted=True)
        assert {r: w for r, w in integral.items() if w} == dict(after)
