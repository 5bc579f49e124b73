"""ivm.operators.window and ivm.operators.distinct_on beside their non-incremental meaning.

Each node (a partitioned window with ties and a ROWS frame, a global window, DISTINCT ON)
runs epoch by epoch through the embedded executor on random weighted changes (inserts,
deletes, several copies, NULL partition keys, partitions emptied); after every epoch the
change it emitted must be exactly ``plain(integral after) − plain(integral before)``
(its ``Plan.plain`` over the input's rows, one per copy) and its integral ``plain(after)``.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable

import duckdb
import pytest
from sqlglot import exp

from ivm.circuit.circuit import Circuit
from ivm.execution.embedded import EpochRunner, create_traces, describe
from ivm.operators.aggregate import AggregateCall, SortKey
from ivm.operators.base import Operator
from ivm.operators.distinct_on import DistinctOn, FirstPerKey
from ivm.operators.scan import Scan, Source
from ivm.operators.window import AGGREGATE, Window, WindowCall, WindowOperator
from ivm.plan.node import Plan
from ivm.plan.sql import W
from ivm.schema import Column, Schema
from ivm.storage.naming import TableNames
from ivm.storage.traces import create_trace

SCHEMA = Schema((Column("k", "INTEGER"), Column("o", "INTEGER"), Column("v", "INTEGER")))
ROWS_FRAME = exp.WindowSpec(kind="ROWS", start=exp.Literal.number(1), start_side="PRECEDING",
                            end="CURRENT ROW")


def _partitioned(scan: Scan) -> Plan:
    calls = (
        WindowCall("rn", "row_number", order=(SortKey("o"),)),
        WindowCall("lagged", "lag", args=(exp.column("v", quoted=True), exp.Literal.number(1),
                                          exp.Literal.number(-1)), order=(SortKey("o", True),)),
        WindowCall("pair", AGGREGATE, aggregate=AggregateCall("pair", "sum", ("v",)),
                   order=(SortKey("o"),), frame=ROWS_FRAME),
        WindowCall("first", "first_value", args=(exp.column("v", quoted=True),),
                   order=(SortKey("o"),)),
    )
    return Window(schema=scan.schema, input=scan, partition=("k",), calls=calls)


def _global(scan: Scan) -> Plan:
    calls = (WindowCall("r", "rank", order=(SortKey("v", True, True),)),
             WindowCall("n", AGGREGATE, aggregate=AggregateCall("n", "count_star")))
    return Window(schema=scan.schema, input=scan, partition=(), calls=calls)


def _firsts(scan: Scan) -> Plan:
    return DistinctOn(schema=scan.schema, input=scan, keys=("k",), order=(SortKey("o", True),))


NODES: dict[str, tuple[Callable[[Scan], Plan], type[Operator]]] = {
    "partitioned": (_partitioned, WindowOperator),
    "global": (_global, WindowOperator),
    "distinct_on": (_firsts, FirstPerKey),
}


def rows_of(names: TableNames) -> str:
    """The input's integral as a bag (one row per live copy)."""
    live = (f"SELECT k, o, v, SUM({W})::BIGINT AS n FROM {names.relation_trace('t')} "
            f"GROUP BY ALL HAVING SUM({W}) > 0")
    return f"SELECT k, o, v FROM ({live}) AS l, range(l.n)"


def bag(con: duckdb.DuckDBPyConnection, sql: str, weighted: bool = False) -> Counter:
    rows = con.execute(sql).fetchall()
    if weighted:
        return Counter({r[:-1]: r[-1] for r in rows})
    return Counter(rows)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", list(NODES))
def test_change_is_the_difference_of_the_plain_query(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    con = duckdb.connect()
    names = TableNames()
    create_trace(con, names.relation_trace("t"), [(c.name, c.type) for c in SCHEMA.columns])
    scan = Scan(schema=SCHEMA, name="t")
    build, operator = NODES[kind]
    untyped = build(scan)  # its schema, as the planner's, is the one DuckDB gives its SQL
    node = dataclasses.replace(untyped, schema=describe(con, untyped.plain([rows_of(names)])))
    op = operator(node, (Source(scan, ()),))
    circuit = Circuit.of("v", op)
    create_traces(con, names, circuit)
    plain = node.plain([rows_of(names)])
    live: Counter = Counter()
    for _ in range(10):
        change: Counter = Counter()
        for _ in range(rng.randint(1, 5)):
            row = (rng.choice([1, 2, None]), rng.choice([1, 2, None]), rng.choice([1, 2, 3]))
            if live[row] + change[row] > 0 and rng.random() < 0.4:
                change[row] -= 1
            else:
                change[row] += rng.choice([1, 1, 2])
        if rng.random() < 0.15:  # a partition emptied
            key = rng.choice([1, 2, None])
            for row, count in live.items():
                if row[0] == key:
                    change[row] = -count
        values = ", ".join(
            "(" + ", ".join("NULL" if x is None else str(x) for x in (*row, w)) + ")"
            for row, w in change.items() if w
        )
        if not values:
            continue
        con.execute(f"CREATE OR REPLACE TEMP TABLE delta AS SELECT * FROM (VALUES {values}) "
                    f"AS d(k, o, v, {W})")
        before = bag(con, plain)
        runner = EpochRunner(con, names, {"t": "SELECT * FROM delta"})
        emitted = bag(con, runner.run(circuit) or "SELECT 1 WHERE false", weighted=True)
        for table, rows in runner.commits:
            con.execute(f"INSERT INTO {table} {rows}")
        con.execute(f"INSERT INTO {names.relation_trace('t')} SELECT * FROM delta")
        live.update(change)
        after = bag(con, plain)
        expected = Counter(after)
        expected.subtract(before)
        assert {r: w for r, w in emitted.items() if w} == {r: w for r, w in expected.items() if w}
        integral = bag(con, runner.integral(op), weighted=True)
        assert {r: w for r, w in integral.items() if w} == dict(after)
