"""ORDER BY … LIMIT / OFFSET (``TopK``) under random CDC, against DuckDB.

One table without a key draws from tiny value domains (NULLs included), so rows tie
on the ORDER BY keys, repeat, and enter and leave the top n every epoch. DuckDB's
own LIMIT picks among ties arbitrarily; ivm breaks them by the output columns
(ascending, NULLS LAST), so each view's oracle is its SQL with those columns
appended to the ORDER BY that holds the LIMIT. Runs with the operator's slack
lowered to 0 make refills (the prefix read again from the input) happen often.
Hand-written epochs pin promotion on deletion, copies straddling the boundary,
refills and OFFSET; one group runs in Spark mode.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
import sqlglot
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS
from sqlglot import exp

import ivm
from ivm.operators import top_k

TABLE = "CREATE TABLE t (id INTEGER, g VARCHAR, x INTEGER)"
OTHER = "CREATE TABLE u (id INTEGER, y DOUBLE)"
DOMAINS = {"t.id": (0, 1, 2, 3, 4, 5), "t.g": ("a", "b", None), "t.x": (None, 1, 2, 3, 4),
           "u.id": (0, 1, 2, 3), "u.y": (None, 0.5, 1.5)}


def tie_broken(sql: str) -> str:
    """``sql`` with its outermost ORDER BY extended by every output column's position:
    ivm's deterministic answer where DuckDB's LIMIT picks among ties."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.left
    assert isinstance(select, exp.Select)
    order = tree.args["order"]
    for position in range(1, len(select.expressions) + 1):
        order.append("expressions", exp.Ordered(this=exp.Literal.number(position)))
    return tree.sql(dialect="duckdb")


VIEWS = {
    "top3": "SELECT id, x FROM t ORDER BY x DESC LIMIT 3",
    "nulls_first": "SELECT x, g FROM t ORDER BY x NULLS FIRST, g DESC LIMIT 4",
    "offset": "SELECT id, x FROM t ORDER BY x LIMIT 2 OFFSET 3",
    "offset_only": "SELECT id, g FROM t ORDER BY id DESC OFFSET 4",
    "hidden": "SELECT g FROM t ORDER BY x, id LIMIT 3",
    "expression": "SELECT id, x + id AS s FROM t ORDER BY x + id DESC, g LIMIT 2",
    "grouped": "SELECT g, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY g "
               "ORDER BY s DESC NULLS LAST LIMIT 2",
    "grouped_hidden": "SELECT g FROM t GROUP BY g ORDER BY COUNT(*) DESC LIMIT 2",
    "distinct": "SELECT DISTINCT x FROM t ORDER BY x DESC LIMIT 2",
    "union": "SELECT x FROM t UNION ALL SELECT id FROM u ORDER BY 1 LIMIT 5",
    "joined": "SELECT t.id, t.x, u.y FROM t JOIN u ON t.id = u.id ORDER BY u.y DESC, t.x "
              "LIMIT 3",
    "limit_zero": "SELECT id FROM t ORDER BY id LIMIT 0",
}
NESTED = {
    # LIMIT inside a query: the oracle's inner ORDER BY is extended by hand.
    "in_from": ("SELECT g, COUNT(*) AS n FROM (SELECT g, x FROM t ORDER BY x DESC LIMIT 4) s "
                "GROUP BY g",
                "SELECT g, COUNT(*) AS n FROM (SELECT g, x FROM t ORDER BY x DESC, 1, 2 LIMIT 4) s "
                "GROUP BY g"),
    "cte_join": ("WITH best AS (SELECT id, x FROM t ORDER BY x DESC LIMIT 3) "
                 "SELECT b.id, b.x, u.y FROM best b JOIN u ON b.id = u.id",
                 "WITH best AS (SELECT id, x FROM t ORDER BY x DESC, 1, 2 LIMIT 3) "
                 "SELECT b.id, b.x, u.y FROM best b JOIN u ON b.id = u.id"),
    "in_list": ("SELECT id, y FROM u WHERE id IN (SELECT id FROM t ORDER BY x, id LIMIT 2)",
                "SELECT id, y FROM u WHERE id IN (SELECT id FROM t ORDER BY x, id, 1 LIMIT 2)"),
    "scalar": ("SELECT id, y FROM u WHERE y < (SELECT x FROM t ORDER BY x DESC NULLS LAST "
               "LIMIT 1)", None),
    # LIMIT n >= 1 cannot change EXISTS: dropped, and the subquery decorrelated as usual.
    "exists_limit": ("SELECT id, g FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id "
                     "ORDER BY u.y LIMIT 1) AND NOT EXISTS (SELECT 1 FROM u WHERE u.y = t.x "
                     "LIMIT 2)", None),
    "count_of_top": ("SELECT COUNT(*) AS n, SUM(x) AS s FROM (SELECT x FROM t ORDER BY x "
                     "LIMIT 3) s", None),
}


def _views_and_oracle(names: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    views, oracle = {}, {}
    for name in names:
        if name in VIEWS:
            views[name] = VIEWS[name]
            oracle[name] = tie_broken(VIEWS[name])
        else:
            views[name], nested_oracle = NESTED[name]
            if nested_oracle is not None:
                oracle[name] = nested_oracle
    return views, oracle


GROUPS = {
    "plain": ["top3", "nulls_first", "offset", "offset_only", "hidden", "expression",
              "limit_zero"],
    "composed": ["grouped", "grouped_hidden", "distinct", "union", "joined"],
    "nested": list(NESTED),
}


SLACKS = pytest.mark.parametrize("slack", [top_k.SLACK, 0], ids=["slack", "no_slack"])


@pytest.mark.parametrize("group", list(GROUPS))
@SLACKS
@settings(RANDOM_CDC, max_examples=examples(3))
@given(data=st.data())
def test_top_k(group: str, slack: int, data: st.DataObject) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    views, oracle = _views_and_oracle(GROUPS[group])
    with patch.object(top_k, "SLACK", slack):
        run_workload([TABLE, OTHER], views, data, epochs=6, domains=DOMAINS, oracle=oracle,
                     warmup=2, modes=("one", "several", "several", "several", "clear"))


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_top_k_state_survives_reopening(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("topk-reopen")
    views, oracle = _views_and_oracle(["top3", "offset", "grouped"])
    run_workload([TABLE, OTHER], views, data, epochs=6, domains=DOMAINS, oracle=oracle,
                 modes=("one", "several"), connect=lambda: ivm.connect(directory),
                 reopen_every=3)


def test_a_view_on_a_top_k_view() -> None:
    harness = Harness([TABLE, OTHER], DOMAINS)
    try:
        harness.create_views({"grouped": VIEWS["grouped"]}, {"grouped": tie_broken(
            VIEWS["grouped"])})
        harness.create_views({"first": "SELECT g FROM grouped ORDER BY n DESC LIMIT 1"},
                             {"first": "SELECT g FROM (" + tie_broken(VIEWS["grouped"])
                              + ") ORDER BY n DESC, 1 LIMIT 1"})
        for rows in ([(1, "a", 3), (2, "b", 4), (3, "a", 1)], [(4, "b", 2), (5, "b", None)]):
            harness.apply(Epoch.of({"t": [("insert", r) for r in rows]}))
        harness.apply(Epoch.of({"t": [("delete", (4, "b", 2)), ("delete", (5, "b", None))]}))
    finally:
        harness.close()


EDGE_VIEWS = {
    "top2": "SELECT id, x FROM t ORDER BY x DESC LIMIT 2",
    "window": "SELECT id, x FROM t ORDER BY x DESC LIMIT 2 OFFSET 1",
    "rest": "SELECT id, x FROM t ORDER BY x DESC OFFSET 2",
}


@SLACKS
def test_top_k_edges_by_hand(slack: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(top_k, "SLACK", slack)
    harness = Harness([TABLE, OTHER], DOMAINS)
    try:
        harness.create_views(EDGE_VIEWS, {n: tie_broken(s) for n, s in EDGE_VIEWS.items()})
        rows = [(i, "a", x) for i, x in enumerate([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])]
        script: list[dict[str, list[Any]]] = [
            {"t": [("insert", r) for r in rows]},
            # the top row leaves: the next one is promoted
            {"t": [("delete", rows[0])]},
            # a new best row pushes the second one out
            {"t": [("insert", (20, "b", 50))]},
            # three copies straddle the boundary; then two of them leave
            {"t": [("insert", (7, "c", 8))] * 3},
            {"t": [("delete", (7, "c", 8))] * 2},
            # deletions empty the prefix below K: a refill from the input (with no slack)
            {"t": [("delete", r) for r in rows[1:7]] + [("delete", (20, "b", 50))]},
            # ties on x, broken by id; NULLs sort last in DESC order (DuckDB's default)
            {"t": [("insert", (1, None, None)), ("insert", (0, "z", 3)), ("insert", (9, "z", 3))]},
            # everything leaves, then comes back in one epoch with an update
            {"t": [("delete", r) for r in rows[7:]] + [("delete", (7, "c", 8)),
                   ("delete", (1, None, None)), ("delete", (0, "z", 3)),
                   ("delete", (9, "z", 3))]},
            {"t": [("insert", r) for r in rows[:4]]},
            {"t": [("update", rows[3], (3, "a", 100))]},
        ]
        for ops in script:
            harness.apply(Epoch.of(ops))
    finally:
        harness.close()


@pytest.mark.parametrize(("sql", "error", "construct"), [
    ("SELECT id FROM t LIMIT 3", ivm.UnsupportedSQL, "LIMIT / OFFSET without ORDER BY"),
    ("SELECT id FROM t OFFSET 3", ivm.UnsupportedSQL, "LIMIT / OFFSET without ORDER BY"),
    ("SELECT id FROM t ORDER BY id LIMIT 10%", ivm.UnsupportedSQL, "PERCENT"),
    ("SELECT id FROM t ORDER BY id LIMIT (SELECT 2)", ivm.UnsupportedSQL, "count"),
    ("SELECT id FROM t ORDER BY id FETCH FIRST 2 ROWS WITH TIES", ivm.UnsupportedSQL,
     "WITH TIES"),
    ("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id ORDER BY u.y "
     "LIMIT 1 OFFSET 1)", ivm.UnsupportedSQL, "correlated LIMIT / OFFSET in a subquery"),
    ("SELECT id FROM t WHERE id IN (SELECT u.id FROM u WHERE u.y = t.x ORDER BY u.id "
     "LIMIT 1)", ivm.UnsupportedSQL, "correlated LIMIT / OFFSET in a subquery"),
    ("SELECT DISTINCT g FROM t ORDER BY x LIMIT 2", ivm.SqlError, "ORDER BY term"),
])
def test_refusals(sql: str, error: type[Exception], construct: str) -> None:
    with ivm.connect() as db:
        db.execute(f"{TABLE}; {OTHER}")
        with pytest.raises(error, match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")
        assert not db.views


def test_fetch_first_is_a_limit_and_explain_shows_the_top_k() -> None:
    with ivm.connect() as db:
        db.execute(TABLE)
        db.execute("CREATE VIEW v AS SELECT id FROM t ORDER BY id DESC FETCH FIRST 2 ROWS ONLY")
        db.ingest("t", [{"id": i, "g": "a", "x": i} for i in range(5)])
        assert sorted(r["id"] for r in db.read("v").to_pylist()) == [3, 4]
        assert "TopK ORDER BY" in db.explain("v") and "one partition" in db.explain("v")


SPARK_NAMES = ["offset", "grouped", "cte_join"]


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_top_k_on_spark(data: st.DataObject, spark: Any,
                        tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-topk")
    views, oracle = _views_and_oracle(SPARK_NAMES)
    run_workload([TABLE, OTHER], views, data, epochs=2, domains=DOMAINS, oracle=oracle,
                 modes=("several",),
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS))
