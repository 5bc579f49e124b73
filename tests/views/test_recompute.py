"""Recomputing a view in place of maintaining it (``ivm.views.recompute``) gives the same
changes and leaves the same state: checked against DuckDB after every epoch, with every
epoch recomputed, and with recomputed and maintained epochs interleaved (state built by
one way is then maintained by the other)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle.harness import MODES, Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC
from test_sql_constructs import CASES

import ivm

RECURSIVE = {
    "reach": "WITH RECURSIVE reach(n) AS (SELECT 1 UNION SELECT e.dst FROM edges e "
             "JOIN reach r ON e.src = r.n) SELECT n FROM reach",
    "windowed": "SELECT src, dst, ROW_NUMBER() OVER (PARTITION BY src ORDER BY dst) AS rn "
                "FROM edges",
    "top2": "SELECT src, dst FROM edges ORDER BY dst DESC, src LIMIT 2",
    "outer": "SELECT a.src, b.dst FROM edges a LEFT JOIN edges b ON a.dst = b.src",
}
EDGES = "CREATE TABLE edges (src INTEGER, dst INTEGER)"


def recomputing(min_rows: int) -> Any:
    """A connect that recomputes every view in epochs of at least ``min_rows`` changed
    rows, whatever share of the inputs they are."""

    def connect(*args: Any, **kwargs: Any) -> ivm.Session:
        db = ivm.connect(*args, **kwargs)
        db.recompute_fraction = 0
        return db

    return connect


@pytest.fixture(autouse=True)
def _no_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ivm.views.recompute.RECOMPUTE_MIN_ROWS", 3)


STATEFUL = ("aggregate_shapes", "min_max", "distinct", "union", "views_on_views", "join_shapes")
"""Cases of tests/test_sql_constructs.py whose views keep operator state of every kind
(group versions, per-key recomputes, distinct counts, set operations, views over views)."""


@pytest.mark.parametrize("case", STATEFUL)
@RANDOM_CDC
@given(data=st.data())
def test_recomputed_and_maintained_epochs_interleave(case: str, data: st.DataObject) -> None:
    # Epochs of 3 or more changed rows recompute, smaller ones maintain.
    tables, views = CASES[case]
    run_workload(tables, views, data, epochs=5, connect=recomputing(3),
                 modes=(*MODES, "clear"))


@RANDOM_CDC
@given(data=st.data())
def test_recursion_windows_top_k_and_outer_joins_recomputed(data: st.DataObject) -> None:
    domains = {"edges.src": (1, 2, 3, 4, None), "edges.dst": (1, 2, 3, 4, None)}
    run_workload([EDGES], RECURSIVE, data, epochs=8, connect=recomputing(3),
                 domains=domains, modes=(*MODES, "clear"))


def test_a_large_batch_recomputes_and_explain_says_so() -> None:
    harness = Harness([EDGES])
    try:
        harness.create_views({"fanout": "SELECT src, COUNT(*) AS n FROM edges GROUP BY src"})
        harness.apply(Epoch.of({"edges": [("insert", (i % 7, i)) for i in range(40)]}))
        assert "strategy: recompute" in harness.db.explain("fanout", analyze=True)
        harness.apply(Epoch.of({"edges": [("delete", (1, 1))]}))  # 1 row of 40: maintained
        assert "strategy: incremental" in harness.db.explain("fanout", analyze=True)
        harness.apply(Epoch.of({"edges": [("insert", (9, i)) for i in range(30)]}))
    finally:
        harness.close()


def test_recompute_fraction_none_always_maintains() -> None:
    db = ivm.connect()
    db.recompute_fraction = None
    db.execute(EDGES + "; CREATE VIEW fanout AS SELECT src, COUNT(*) AS n FROM edges GROUP BY src")
    db.ingest("edges", [{"src": i % 3, "dst": i} for i in range(50)])
    assert "strategy: incremental" in db.explain("fanout", analyze=True)
    with pytest.raises(ivm.IvmError, match="recompute_fraction"):
        db.recompute_fraction = -1
