"""SELECT without FROM: a constant relation of one row (``SELECT 1, 'a'``), as a VALUES list.

Its rows are the view's change once, when the view's state starts, and never after: as a
whole view, with a WHERE (``SELECT 1 WHERE false``), in a UNION, a CTE, a recursive CTE's
anchor, a scalar subquery, a join with tables. Random CDC epochs against DuckDB's
recomputation, hand-written cases, and Spark mode.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import MODES, run_workload
from oracle.rows import rows
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

ITEMS = "CREATE TABLE items (id INTEGER PRIMARY KEY, code VARCHAR, qty INTEGER)"
EDGES = "CREATE TABLE edges (src INTEGER, dst INTEGER)"

VIEWS = {
    "constant": "SELECT 1 AS one, 'a' AS letter, NULL AS nothing",
    "nothing": "SELECT 1 AS x WHERE false",
    "with_zero": "SELECT qty FROM items UNION SELECT 0",
    "all_and_zero": "SELECT qty FROM items UNION ALL SELECT 0 UNION ALL SELECT 0",
    "defaults": "WITH d AS (SELECT 'NA' AS dflt) SELECT i.id, coalesce(i.code, d.dflt) AS code "
                "FROM items i, d",
    "scaled": "SELECT id, qty * (SELECT 10) AS q FROM items WHERE qty > (SELECT 1)",
    "counted": "SELECT (SELECT count(*) FROM items) AS n",
    "reach": "WITH RECURSIVE r(node, depth) AS (SELECT 1, 0 UNION SELECT e.dst, r.depth + 1 "
             "FROM r JOIN edges e ON e.src = r.node WHERE r.depth < 4) SELECT * FROM r",
    "joined": "SELECT i.id, c.k FROM items i JOIN (SELECT 2 AS k) AS c ON i.qty = c.k",
    "global": "SELECT count(*) AS n, max(1) AS m",
}


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_select_without_from_under_random_cdc(data: st.DataObject) -> None:
    run_workload([ITEMS, EDGES], VIEWS, data, epochs=10, modes=(*MODES, "clear"))


def test_a_constant_view_never_changes() -> None:
    with ivm.connect() as db:
        db.execute(f"{ITEMS}; CREATE VIEW constant AS {VIEWS['constant']}; "
                   f"CREATE VIEW nothing AS {VIEWS['nothing']}")
        assert db.read("constant").column_names == ["one", "letter", "nothing"]
        assert rows(db.read("constant")) == [(1, "a", None)]
        assert db.read("nothing").num_rows == 0
        assert not db.views["constant"].sources
        deltas = db.ingest("items", [{"id": 1, "code": "x", "qty": 2}])
        assert deltas["constant"].num_rows == 0 and deltas["nothing"].num_rows == 0
        assert "Constant Values 1 row" in db.explain("constant")


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_select_without_from_on_spark(data: st.DataObject, spark: Any,
                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    # The one constant row reaches exactly one partition (test_values.py reopens).
    directory = tmp_path_factory.mktemp("spark-no-from")
    names = ("all_and_zero", "defaults")
    run_workload([ITEMS], {n: VIEWS[n] for n in names}, data, epochs=3,
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
