"""ivm.operators.invariant_columns: which columns of a recursion its step never changes.

The expectations are checked against the recursive views of tests/test_recursive.py, and
each claimed invariant is checked on the data: DuckDB's own WITH RECURSIVE, run over random
graphs, gives the same rows as running it apart for each value of the column's anchor rows
(what a partitioned fixed point does).
"""

from __future__ import annotations

import random

import duckdb
import pytest

from ivm.execution.embedded import describe
from ivm.operators.invariant_columns import invariant_positions
from ivm.operators.recursive import Recursive
from ivm.plan.node import Plan
from ivm.sql_frontend.planner import plan_query

TABLES = {"e": "s INTEGER, d INTEGER", "src": "id INTEGER", "nodes": "id INTEGER"}

EXPECTED = {
    "SELECT s, d FROM e UNION SELECT r.a, e.d FROM r JOIN e ON r.b = e.s": (0,),
    "SELECT s, d FROM e UNION ALL SELECT r.a, e.d FROM r JOIN e ON r.b = e.s "
    "WHERE e.d > r.b": (0,),
    "SELECT s, d FROM e UNION SELECT x.a, y.b FROM r x JOIN r y ON x.b = y.a": (),  # read twice
    "SELECT id, id FROM nodes UNION SELECT x.d, r.b FROM r JOIN (SELECT s, d FROM e UNION ALL "
    "SELECT d, s FROM e) x ON r.a = x.s": (1,),  # connected components' label
    "SELECT id, 0 FROM src UNION SELECT e.d, r.b + 1 FROM r JOIN e ON r.a = e.s "
    "WHERE r.b < 7": (),  # hops: both columns change
    "SELECT s, d FROM e UNION SELECT r.b, r.a FROM r": (),  # swapped: not at its own position
    "SELECT s, d FROM e UNION SELECT r.a, MAX(e.d) FROM r JOIN e ON r.b = e.s "
    "GROUP BY r.a": (),  # through an aggregate
    "SELECT s, d FROM e UNION SELECT DISTINCT r.a, r.b FROM r WHERE r.a > 1": (0, 1),
}


def plan_of(con: duckdb.DuckDBPyConnection, body: str) -> Plan:
    relations = {name: describe(con, f"SELECT * FROM {name}") for name in TABLES}
    sql = f"WITH RECURSIVE r(a, b) AS ({body}) SELECT * FROM r"
    return plan_query(sql, relations, lambda text: describe(con, text))


def tables(seed: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for name, columns in TABLES.items():
        con.execute(f"CREATE TABLE {name} ({columns})")
    if seed is not None:
        rng = random.Random(seed)
        edges = [(rng.randint(0, 5), rng.randint(0, 5)) for _ in range(rng.randint(0, 12))]
        if edges:
            con.execute("INSERT INTO e VALUES " + ", ".join(f"({s}, {d})" for s, d in edges))
        con.execute("INSERT INTO src VALUES (0), (3)")
        con.execute("INSERT INTO nodes SELECT range FROM range(6)")
    return con


@pytest.mark.parametrize("body", list(EXPECTED))
def test_invariant_positions(body: str) -> None:
    (recursive,) = [n for n in plan_of(tables(), body).walk() if isinstance(n, Recursive)]
    assert invariant_positions(recursive) == EXPECTED[body]


def apart_equals_whole(body: str, column: str) -> bool:
    """Whether running the recursion apart for each value of ``column`` among the anchor's
    rows gives, on every random graph tried, the rows of running it whole."""
    anchor = body.split(" UNION")[0]
    step = body[len(anchor):]
    for seed in range(8):
        con = tables(seed)
        whole = sorted(con.sql(f"WITH RECURSIVE r(a, b) AS ({body}) SELECT * FROM r").fetchall())
        values = con.sql(f"SELECT DISTINCT {column} FROM ({anchor}) AS x(a, b)").fetchall()
        apart = []
        for (value,) in values:
            only = (f"SELECT * FROM ({anchor}) AS x(a, b) "
                    f"WHERE {column} IS NOT DISTINCT FROM {'NULL' if value is None else value}")
            apart += con.sql(f"WITH RECURSIVE r(a, b) AS ({only}{step}) SELECT * FROM r").fetchall()
        if sorted(apart) != whole:
            return False
    return True


@pytest.mark.parametrize("body", [b for b, found in EXPECTED.items() if found])
def test_a_recursion_run_apart_per_invariant_value_gives_the_same_rows(body: str) -> None:
    assert all(apart_equals_whole(body, "ab"[p]) for p in EXPECTED[body])


def test_running_apart_by_a_column_the_step_changes_differs() -> None:
    tc = next(iter(EXPECTED))
    assert not apart_equals_whole(tc, "b")  # the check can fail
