"""WHERE through outer joins (sql_frontend/planner/where_pushdown.py), under random CDC.

A WHERE conjunct that rejects the NULLs a join pads with makes that outer join inner (a
FULL join one-sided); other conjuncts move into the ON of the inner join where the rows
they read meet, so a later outer join stores only the rows the query keeps. Every view is
checked against DuckDB running the original query after every epoch: a conjunct wrongly
taken for NULL-rejecting, or moved past a RIGHT/FULL join, gives different rows. The
tables have few key values and NULLs in every column, so rows move between matched and
padded often.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.sql_frontend.planner.where_pushdown import push_where, rejects

L = "CREATE TABLE l (k INTEGER, x INTEGER, s VARCHAR)"
R = "CREATE TABLE r (k INTEGER, y INTEGER, s VARCHAR)"
M = "CREATE TABLE m (k INTEGER, z INTEGER)"
TABLES = [L, R, M]
DOMAINS = {"l.k": (1, 2, 3), "r.k": (1, 2, 3), "m.k": (1, 2, 3), "l.s": ("a", "b"),
           "r.s": ("a", "b"), "l.x": (0, 1, 2), "r.y": (0, 1, 2, 5), "m.z": (0, 1, 2)}

TWO_WAY: dict[str, str] = {
    # rejecting: the outer join becomes inner (or one-sided)
    "left_cmp": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y > 0",
    "left_or_both": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y > 1 OR r.s = 'a'",
    "left_not_in": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y NOT IN (1, 2)",
    "left_like": "SELECT l.x, r.s FROM l LEFT JOIN r ON l.k = r.k WHERE NOT r.s LIKE 'a%'",
    "left_arith": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE l.x + r.y * 2 >= 2",
    "left_between": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE l.x BETWEEN r.y AND 3",
    "left_not_null": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.s IS NOT NULL",
    "right_cmp": "SELECT l.x, r.* FROM l RIGHT JOIN r ON l.k = r.k WHERE l.s = 'a'",
    "full_left": "SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE l.x >= 1",
    "full_right": "SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE r.y < 5 AND l.k IS NULL",
    "full_both": "SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE l.x + r.y > 1",
    "full_cast": "SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE CAST(r.s AS VARCHAR) = 'b'",
    "grouped": "SELECT l.k, COUNT(*) AS n, SUM(r.y) AS sy FROM l LEFT JOIN r "
               "ON l.k = r.k WHERE r.y <> 2 GROUP BY l.k",
    # not rejecting: the padded rows stay
    "left_is_null": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y IS NULL",
    "left_coalesce": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE COALESCE(r.y, 0) = 0",
    "left_or_mixed": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y > 1 OR l.x > 1",
    "left_case": "SELECT * FROM l LEFT JOIN r ON l.k = r.k "
                 "WHERE CASE WHEN r.y IS NULL THEN l.x = 1 ELSE r.y > 1 END",
    "left_distinct": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y IS DISTINCT FROM 1",
    "left_concat": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE concat(r.s, 'x') = 'x'",
    "left_own_side": "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE l.x = 1",
    "full_is_null": "SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE l.k IS NULL OR r.y = 0",
    "right_left_only": "SELECT * FROM l RIGHT JOIN r ON l.k = r.k WHERE r.y = 1",
    "left_subquery": "SELECT * FROM l LEFT JOIN r ON l.k = r.k "
                     "WHERE r.y IN (SELECT z FROM m) OR r.y IS NULL",
}

THREE_WAY: dict[str, str] = {
    # conjuncts of the inner join move into its ON, below the LEFT join's state
    "inner_then_left": "SELECT l.k, r.y, m.z FROM l JOIN r ON l.k = r.k "
                       "LEFT JOIN m ON m.k = l.k WHERE l.x = 1 AND r.y > 0 AND l.x < r.y",
    "inner_then_left_padded": "SELECT l.k, r.y, m.z FROM l JOIN r ON l.k = r.k "
                              "LEFT JOIN m ON m.k = l.k WHERE m.z IS NULL AND r.y <> 5",
    "left_then_inner": "SELECT l.k, r.y, m.z FROM l LEFT JOIN r ON l.k = r.k "
                       "JOIN m ON m.k = l.k WHERE r.y IS NULL OR m.z > r.y",
    "left_left": "SELECT l.k, r.y, m.z FROM l LEFT JOIN r ON l.k = r.k "
                 "LEFT JOIN m ON m.k = r.k WHERE m.z > 0 AND l.x <> 2",
    "left_left_isnull": "SELECT l.k, r.y, m.z FROM l LEFT JOIN r ON l.k = r.k "
                        "LEFT JOIN m ON m.k = l.k WHERE r.k IS NULL AND m.z >= 1",
    "inner_right": "SELECT l.k, r.y, m.* FROM l JOIN r ON l.k = r.k "
                   "RIGHT JOIN m ON m.k = l.k WHERE l.x > 0",
    "inner_right_kept": "SELECT l.k, r.y, m.* FROM l JOIN r ON l.k = r.k "
                        "RIGHT JOIN m ON m.k = l.k WHERE l.x IS NULL OR m.z = 0",
    "inner_right_guard": "SELECT l.k, r.y, m.* FROM l JOIN r ON l.k = r.k "
                         "RIGHT JOIN m ON m.k = l.k WHERE l.x IS NULL OR r.y = 1",
    "inner_full_guard": "SELECT l.k, r.y, m.* FROM l JOIN r ON l.k = r.k "
                        "FULL JOIN m ON m.k = r.k WHERE COALESCE(l.x, 0) = 0",
    "left_full": "SELECT l.k, r.y, m.z FROM l LEFT JOIN r ON l.k = r.k "
                 "FULL JOIN m ON m.k = r.k WHERE r.y BETWEEN 1 AND 2",
    "left_full_right": "SELECT l.k, r.y, m.z FROM l LEFT JOIN r ON l.k = r.k "
                       "FULL JOIN m ON m.k = r.k WHERE m.z = 1",
    "full_inner": "SELECT l.k, r.y, m.z FROM l FULL JOIN r ON l.k = r.k "
                  "JOIN m ON m.k = COALESCE(l.k, r.k) WHERE m.z < 2 AND l.x = 0",
    "comma": "SELECT l.k, r.y, m.z FROM l, r LEFT JOIN m ON m.k = r.k "
             "WHERE l.k = r.k AND l.s = r.s AND m.z IS NOT NULL",
    "derived": "SELECT l.k, q.sy FROM l LEFT JOIN (SELECT k, SUM(y) AS sy FROM r GROUP BY k) "
               "AS q ON q.k = l.k JOIN m ON m.k = l.k WHERE q.sy > 1 AND m.z <> 1",
    "grouped_chain": "SELECT m.k, COUNT(l.x) AS nl, SUM(r.y) AS sr FROM m LEFT JOIN l "
                     "ON l.k = m.k LEFT JOIN r ON r.k = l.k WHERE l.x > 0 GROUP BY m.k",
}

GROUPS = {"two_way_a": dict(list(TWO_WAY.items())[:12]),
          "two_way_b": dict(list(TWO_WAY.items())[12:]), "three_way": THREE_WAY}


@pytest.mark.parametrize("group", list(GROUPS))
@RANDOM_CDC
@given(data=st.data())
def test_where_through_outer_joins_random_cdc(group: str, data: st.DataObject) -> None:
    run_workload(TABLES, GROUPS[group], data, epochs=8, domains=DOMAINS)


# --- the rewrite itself ----------------------------------------------------------------


def rewritten(sql: str) -> str:
    """``sql`` (qualified by hand) after ``push_where``, as DuckDB SQL."""
    return push_where(sqlglot.parse_one(sql, read="duckdb")).sql("duckdb")


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y > 0",
     "SELECT * FROM l JOIN r ON l.k = r.k AND r.y > 0"),
    ("SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y IS NULL",
     "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y IS NULL"),
    ("SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE l.x > 0",
     "SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE l.x > 0"),
    ("SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE r.y > 0",
     "SELECT * FROM l RIGHT JOIN r ON l.k = r.k WHERE r.y > 0"),
    ("SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE r.y > l.x",
     "SELECT * FROM l JOIN r ON l.k = r.k AND r.y > l.x"),
    ("SELECT * FROM l JOIN r ON l.k = r.k LEFT JOIN m ON m.k = l.k WHERE l.x = 1",
     "SELECT * FROM l JOIN r ON l.k = r.k AND l.x = 1 LEFT JOIN m ON m.k = l.k"),
    ("SELECT * FROM l JOIN r ON l.k = r.k RIGHT JOIN m ON m.k = l.k WHERE m.z = 1",
     "SELECT * FROM l JOIN r ON l.k = r.k RIGHT JOIN m ON m.k = l.k WHERE m.z = 1"),
    ("SELECT * FROM l JOIN r ON l.k = r.k FULL JOIN m ON m.k = l.k WHERE l.x IS NULL",
     "SELECT * FROM l JOIN r ON l.k = r.k FULL JOIN m ON m.k = l.k WHERE l.x IS NULL"),
    ("SELECT * FROM l JOIN r ON l.k = r.k LEFT JOIN m ON m.k = l.k "
     "WHERE l.x = (SELECT MAX(z) FROM m)",
     "SELECT * FROM l JOIN r ON l.k = r.k LEFT JOIN m ON m.k = l.k "
     "WHERE l.x = (SELECT MAX(z) FROM m)"),
    ("SELECT * FROM l JOIN r ON l.k = r.k LEFT JOIN m ON m.k = l.k WHERE random() < l.x",
     "SELECT * FROM l JOIN r ON l.k = r.k LEFT JOIN m ON m.k = l.k WHERE RANDOM() < l.x"),
])
def test_rewrite(sql: str, expected: str) -> None:
    assert rewritten(sql) == expected


@pytest.mark.parametrize(("condition", "table", "expected"), [
    ("r.y = 1", "r", True), ("r.y = 1", "l", False), ("NOT r.y = 1", "r", True),
    ("r.y IS NULL", "r", False), ("r.y IS NOT NULL", "r", True),
    ("COALESCE(r.y, 0) = 0", "r", False), ("r.y + 1 > l.x", "r", True),
    ("r.y > 1 OR l.x > 1", "r", False), ("r.y > 1 OR r.s = 'a'", "r", True),
    ("r.y > 1 AND l.x IS NULL", "r", True), ("l.x IN (r.y, 1)", "r", False),
    ("r.y IN (1, 2)", "r", True), ("r.y IS DISTINCT FROM 1", "r", False),
    ("CASE WHEN r.y > 0 THEN TRUE END", "r", False), ("l.x BETWEEN r.y AND 3", "r", True),
])
def test_rejects(condition: str, table: str, expected: bool) -> None:
    assert rejects(sqlglot.parse_one(condition, read="duckdb"), table) is expected


def test_the_filter_runs_below_the_outer_join_state() -> None:
    """The q72 shape: the inner join's rows are filtered before the LEFT JOIN keeps them."""
    db = ivm.connect()
    try:
        db.execute(f"{L}; {R}; {M}; CREATE VIEW v AS SELECT l.k, r.y, m.z FROM l "
                   "JOIN r ON l.k = r.k LEFT JOIN m ON m.k = l.k WHERE l.x = 3")
        text = db.explain("v")
        join = next(line for line in text.splitlines() if '"l.k" = "r.k"' in line)
        assert '"l.x" = 3' in join, text
        assert "Filter" not in text, text
        db.execute("CREATE VIEW w AS SELECT * FROM l LEFT JOIN r ON l.k = r.k WHERE r.y > 3")
        assert "Difference" not in db.explain("w")  # an inner join: no padded rows at all
    finally:
        db.close()


def test_scripted_rows_move_between_matched_and_padded() -> None:
    harness = Harness(TABLES, DOMAINS)
    try:
        harness.create_views({**{k: TWO_WAY[k] for k in ("left_cmp", "left_is_null",
                                                          "full_left", "full_both")},
                              "chain": THREE_WAY["inner_then_left_padded"]})
        a, b, c = (1, 2, "a"), (1, 1, "b"), (1, 0)
        script = [
            {"l": [("insert", a), ("insert", (None, 1, None))]},
            {"r": [("insert", b), ("insert", (2, None, "a"))]},
            {"m": [("insert", c)], "r": [("update", b, (1, 0, "b"))]},
            {"m": [("update", c, (1, None))], "l": [("update", a, (2, 2, "a"))]},
            {"l": [("delete", (2, 2, "a"))], "r": [("delete", (2, None, "a"))]},
        ]
        for i, ops in enumerate(script):
            harness.apply(Epoch.of(ops, variant=i))
    finally:
        harness.close()


# --- Spark mode ------------------------------------------------------------------------


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_where_pushdown_on_spark(data: st.DataObject, spark: Any,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-pushdown")
    harness = Harness(TABLES, DOMAINS, connect=lambda: ivm.connect(
        directory, spark=spark, partitions=SPARK_PARTITIONS))
    try:
        harness.apply(data.draw(harness.strategy(), label="before the views"))
        harness.create_views({"chain": THREE_WAY["inner_then_left"],
                              "full": TWO_WAY["full_left"]})
        for i in range(2):
            harness.apply(data.draw(harness.strategy(), label=f"epoch {i + 1}"))
    finally:
        harness.close()
