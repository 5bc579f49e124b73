"""A join's delta terms list their inputs so that each is linked to one listed before it.

TPC-DS q64 joins two copies of ``date_dim`` that only ``customer`` links (first sales
and first ship-to dates). In the term of one copy's change, the FROM list began with
the other copy and that change: DuckDB planned their cross product (107M rows at scale
0.01, 4-9 s per epoch) once ``customer`` was read at the change's keys. Each term now
starts from its changed input and adds inputs linked to those already listed
(``DeltaJoin._from_order``). Here: DuckDB's plan of every statement an epoch runs has no
cross product, the order itself, and random CDC over the shape.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC

import ivm
from ivm.execution import embedded
from ivm.operators.join import DeltaJoin
from ivm.storage import results

SPOKES = 10
TABLES = [
    "CREATE TABLE dates (d_sk INTEGER PRIMARY KEY, d_year INTEGER)",
    "CREATE TABLE cust (c_sk INTEGER PRIMARY KEY, c_sales INTEGER, c_ship INTEGER, "
    + ", ".join(f"c_s{k} INTEGER" for k in range(SPOKES)) + ")",
    "CREATE TABLE small (s_sk INTEGER PRIMARY KEY, s_name VARCHAR)",
]
# A star of 13 inputs around ``cust`` (wider than 12: one join whose condition holds the
# equalities, ``wide_joins``), the two date copies first in FROM, unlinked to each
# other: q64's shape.
VIEW = ("SELECT d2.d_year AS sales_year, d3.d_year AS ship_year, c_sk, "
        + ", ".join(f"s{k}.s_name AS n{k}" for k in range(SPOKES))
        + " FROM dates d2, dates d3, cust, " + ", ".join(f"small s{k}" for k in range(SPOKES))
        + " WHERE c_sales = d2.d_sk AND c_ship = d3.d_sk AND "
        + " AND ".join(f"c_s{k} = s{k}.s_sk" for k in range(SPOKES)))


@contextmanager
def plans() -> Iterator[list[str]]:
    """DuckDB's plans of the queries the statements run meanwhile write or insert (through
    ``run_sql``, or ``fetch_arrow``: a view's change appended with RETURNING)."""
    found: list[str] = []
    originals = {"run_sql": embedded.run_sql, "fetch_arrow": results.fetch_arrow}

    def planned(con: Any, sql: str) -> None:
        query = re.sub(r"^(CREATE OR REPLACE TEMP TABLE \S+ AS |INSERT INTO \S+ )", "", sql)
        query = re.sub(r" RETURNING .*$", "", query, flags=re.DOTALL)
        if query.startswith("SELECT"):
            found.append(con.execute("EXPLAIN " + query).fetchall()[0][1])

    def run_spy(con: Any, sql: str, *where: Any) -> int:
        planned(con, sql)
        return originals["run_sql"](con, sql, *where)

    def fetch_spy(con: Any, sql: str) -> Any:
        planned(con, sql)
        return originals["fetch_arrow"](con, sql)

    spies = {"run_sql": run_spy, "fetch_arrow": fetch_spy}
    holders = [(m, name) for key, m in sys.modules.items() if key.startswith("ivm")
               for name, original in originals.items() if getattr(m, name, None) is original]
    for module, name in holders:
        setattr(module, name, spies[name])
    try:
        yield found
    finally:
        for module, name in holders:
            setattr(module, name, originals[name])


def test_no_delta_term_is_a_cross_product() -> None:
    with ivm.connect() as db:
        db.execute(";".join(TABLES))
        db.ingest({
            "dates": [{"d_sk": i, "d_year": 1990 + i % 30} for i in range(600)],
            "cust": [{"c_sk": i, "c_sales": i * 7 % 600, "c_ship": i * 11 % 600,
                      **{f"c_s{k}": (i + k) % 20 for k in range(SPOKES)}} for i in range(200)],
            "small": [{"s_sk": i, "s_name": "MSDW"[i % 4]} for i in range(20)],
        })
        db.execute(f"CREATE VIEW v AS {VIEW}")
        with plans() as seen:
            db.ingest({"dates": [{"d_sk": i, "d_year": 1990 + i % 30, "__w": -1}
                                 for i in range(0, 300, 10)]
                       + [{"d_sk": i, "d_year": 2001, "__w": 1} for i in range(600, 630)]})
        assert any("Hash Join" in p for p in seen)
        assert not [p for p in seen if "Cross Product" in p]


def test_each_term_starts_from_its_change_when_the_join_order_is_not_linked() -> None:
    with ivm.connect() as db:
        db.execute(";".join(TABLES) + f"; CREATE VIEW v AS {VIEW}")
        joins = [op for op in db._views["v"].circuit.operators
                 if isinstance(op, DeltaJoin)]
    (join,) = joins
    # inputs: d2, d3, cust, s0 … s9; cust links each of the others
    spokes = list(range(3, 3 + SPOKES))
    assert join._from_order(0) == [0, 2, 1, *spokes]
    assert join._from_order(1) == [1, 2, 0, *spokes]
    assert join._from_order(4) == [4, 2, 0, 1, 3, *spokes[2:]]


@RANDOM_CDC
@given(data=st.data())
def test_reordered_terms_under_random_cdc(data: st.DataObject) -> None:
    run_workload(TABLES, {"v": VIEW}, data, epochs=5)
