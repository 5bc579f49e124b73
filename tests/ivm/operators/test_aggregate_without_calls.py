"""An aggregate with keys and no call (a GROUP BY without aggregates) in each of its
incremental forms, beside its meaning.

The planner makes such a GROUP BY a ``Distinct``; the aggregate operators must still
emit valid SQL for an empty call list (issue #22: the invertible form emitted
``…, , 1::BIGINT``). Each form runs epoch by epoch through the embedded executor on
random changes (duplicates, NULL keys, deletes crossing zero); after every epoch the
change it emitted must be exactly the difference of the distinct keys before and after,
and its integral the distinct keys.
"""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest

from ivm.circuit.circuit import Circuit
from ivm.execution.embedded import EpochRunner, create_traces, describe
from ivm.operators.aggregate import Aggregate
from ivm.operators.base import Operator
from ivm.operators.group_recompute import GroupRecompute
from ivm.operators.invertible_aggregate import InvertibleAggregate
from ivm.operators.scan import Scan, Source
from ivm.plan.sql import W
from ivm.schema import Column, Schema
from ivm.storage.naming import TableNames
from ivm.storage.traces import create_trace

SCHEMA = Schema((Column("k", "INTEGER"), Column("v", "VARCHAR")))


def operator(form: str, con: duckdb.DuckDBPyConnection) -> Operator:
    scan = Scan(schema=SCHEMA, name="t")
    node = Aggregate(schema=SCHEMA, input=scan, keys=("k", "v"), calls=())
    inputs = (Source(scan, ()),)
    if form == "invertible":
        forms = node.invertible_forms()
        assert forms == []
        return InvertibleAggregate.build(node, inputs, forms, lambda sql: describe(con, sql))
    return GroupRecompute.build(node, inputs, lambda sql: describe(con, sql))


def literal(value: object) -> str:
    return "NULL" if value is None else repr(value)


@pytest.mark.parametrize("form", ["invertible", "per_key"])
@pytest.mark.parametrize("seed", range(2))
def test_aggregate_without_calls_is_the_distinct_keys(form: str, seed: int) -> None:
    rng = random.Random(seed)
    con = duckdb.connect()
    names = TableNames()
    create_trace(con, names.relation_trace("t"), [("k", "INTEGER"), ("v", "VARCHAR")])
    op = operator(form, con)
    circuit = Circuit.of("v", op)
    create_traces(con, names, circuit)
    live: Counter = Counter()
    distinct = (
        f"SELECT k, v FROM {names.relation_trace('t')} GROUP BY k, v HAVING SUM({W}) > 0"
    )
    for _ in range(12):
        change: Counter = Counter()
        for _ in range(rng.randint(1, 5)):
            row = (rng.choice([1, 2, None]), rng.choice(["x", None]))
            if live[row] + change[row] > 0 and rng.random() < 0.45:
                change[row] -= rng.choice([1, live[row] + change[row]])
            else:
                change[row] += rng.choice([1, 1, 3])
        values = ", ".join(f"({literal(k)}, {literal(v)}, {w})" for (k, v), w in change.items()
                           if w)
        if not values:
            continue
        live.update(change)
        con.execute(f"CREATE OR REPLACE TEMP TABLE delta AS "
                    f"SELECT * FROM (VALUES {values}) AS d(k, v, {W})")
        before = Counter(con.execute(distinct).fetchall())
        runner = EpochRunner(con, names, {"t": "SELECT * FROM delta"})
        emitted_sql = runner.run(circuit)
        emitted = Counter()
        if emitted_sql is not None:
            for *row, w in con.execute(emitted_sql).fetchall():
                emitted[tuple(row)] += w
        for table, committed in runner.commits:
            con.execute(f"INSERT INTO {table} {committed}")
        con.execute(f"INSERT INTO {names.relation_trace('t')} SELECT * FROM delta")
        after = Counter(con.execute(distinct).fetchall())
        expected = Counter(after)
        expected.subtract(before)
        assert {r: w for r, w in emitted.items() if w} == {r: w for r, w in expected.items() if w}
        integral = Counter()
        for *row, w in con.execute(runner.integral(op)).fetchall():
            integral[tuple(row)] += w
        assert {r: w for r, w in integral.items() if w} == dict(after)
