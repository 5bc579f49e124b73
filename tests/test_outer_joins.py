"""Outer, semi and anti joins, USING and NATURAL, under random CDC and scripted edges.

Every view is checked against DuckDB after every epoch (tests/oracle/harness.py):
contents, deltas, and the plan's plain SQL. The tables have few key values and
NULL keys, so rows move between matched and padded often; both sides change in
one epoch ("several" mode), tables are emptied and refilled.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

L = "CREATE TABLE l (k INTEGER, x INTEGER, s VARCHAR)"
R = "CREATE TABLE r (k INTEGER, y INTEGER, s VARCHAR)"
M = "CREATE TABLE m (k INTEGER, z INTEGER)"
TABLES = [L, R, M]
DOMAINS = {"l.k": (1, 2, 3), "r.k": (1, 2, 3), "m.k": (1, 2, 3),
           "l.x": (0, 1, 2), "r.y": (0, 1, 2, 5), "m.z": (0, 1, 2)}

EPOCHS = {"two_way_a": 10, "two_way_b": 10, "three_way": 7}
"""Epochs per group (the three-way group has 21 views, each several operators)."""

TWO_WAY: dict[str, str] = {
    "left_eq": "SELECT * FROM l LEFT JOIN r ON l.k = r.k",
    "right_eq": "SELECT l.x, r.* FROM l RIGHT JOIN r ON l.k = r.k",
    "full_eq": "SELECT * FROM l FULL OUTER JOIN r ON l.k = r.k",
    "left_filters": "SELECT l.k, l.x, r.y FROM l LEFT JOIN r "
                    "ON l.k = r.k AND l.x > 1 AND r.y <> 5",
    "full_two_keys": "SELECT * FROM l FULL JOIN r ON l.k = r.k AND l.s = r.s",
    "left_mixed": "SELECT * FROM l LEFT JOIN r ON l.k = r.k AND l.x < r.y",
    "full_theta": "SELECT l.x, r.y FROM l FULL JOIN r ON l.x < r.y",
    "right_null_safe": "SELECT * FROM l RIGHT JOIN r ON l.k IS NOT DISTINCT FROM r.k",
    "left_false": "SELECT * FROM l LEFT JOIN r ON FALSE",
    "full_null_cond": "SELECT * FROM l FULL JOIN r ON NULL IS NOT NULL",
    "left_expr_key": "SELECT * FROM l LEFT JOIN r ON l.k + 1 = r.k",
    "unmatched": "SELECT l.* FROM l LEFT JOIN r ON l.k = r.k WHERE r.k IS NULL",
    "padded_where": "SELECT * FROM l FULL JOIN r ON l.k = r.k WHERE l.x IS NULL OR r.y > 0",
    "aggregate": "SELECT l.k, COUNT(*) AS n, COUNT(r.y) AS ny, SUM(r.y) AS sy "
                 "FROM l LEFT JOIN r ON l.k = r.k GROUP BY l.k",
    "distinct": "SELECT DISTINCT l.k, r.s FROM l FULL JOIN r ON l.k = r.k",
    "self": "SELECT a.k, a.x, b.x AS bx FROM l a LEFT JOIN l b ON a.k = b.k AND a.x < b.x",
    "semi": "SELECT * FROM l SEMI JOIN r ON l.k = r.k AND r.y > 0",
    "anti": "SELECT * FROM l ANTI JOIN r ON l.k = r.k",
    "anti_mixed": "SELECT * FROM l ANTI JOIN r ON l.k = r.k AND l.x < r.y",
    "using_full": "SELECT * FROM l FULL JOIN r USING (k)",
    "using_left": "SELECT k, x, y FROM l LEFT JOIN r USING (k, s)",
    "natural": "SELECT * FROM l NATURAL JOIN r",
    "natural_full": "SELECT * FROM l NATURAL FULL JOIN r",
    "cross": "SELECT l.k, m.k AS mk FROM l CROSS JOIN m",
}

JOINS = ("JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN")


def three_way(first: str, second: str, mixed: bool) -> str:
    """l ⨝ r ⨝ m with the given joins; the second condition reads l, or r and l."""
    on = "m.k = r.k AND m.z <= l.x" if mixed else "m.k = l.k"
    return (f"SELECT l.k, l.x, r.y, m.z FROM l {first} r ON l.k = r.k "
            f"{second} m ON {on}")


THREE_WAY = {
    f"{a.split()[0].lower()}_{b.split()[0].lower()}_{i % 2}": three_way(a, b, i % 2 == 1)
    for i, (a, b) in enumerate(itertools.product(JOINS, JOINS))
}
THREE_WAY["nested"] = ("SELECT * FROM l LEFT JOIN (r JOIN m ON r.k = m.k) ON l.k = r.k")
THREE_WAY["inner_after_outer"] = ("SELECT l.k, r.y, m.z FROM l FULL JOIN r ON l.k = r.k "
                                  "JOIN m ON m.k = COALESCE(l.k, r.k)")
THREE_WAY["using_chain"] = "SELECT * FROM l LEFT JOIN r USING (k) FULL JOIN m USING (k)"
THREE_WAY["agg_chain"] = ("SELECT m.k, COUNT(l.x) AS nl, SUM(r.y) AS sr FROM m "
                          "LEFT JOIN l ON l.k = m.k LEFT JOIN r ON r.k = l.k GROUP BY m.k")

GROUPS = {
    "two_way_a": dict(list(TWO_WAY.items())[:12]),
    "two_way_b": dict(list(TWO_WAY.items())[12:]),
    "three_way": THREE_WAY,
}


@pytest.mark.parametrize("group", list(GROUPS))
@RANDOM_CDC
@given(data=st.data())
def test_outer_joins_random_cdc(group: str, data: st.DataObject) -> None:
    run_workload(TABLES, GROUPS[group], data, epochs=EPOCHS[group], domains=DOMAINS)


def test_every_three_way_combination_is_covered() -> None:
    pairs = {(sql.split(" r ON")[0].split("FROM l ")[1], sql.split(" m ON")[0].split("r.k ")[-1])
             for name, sql in THREE_WAY.items() if name[-1] in "01"}
    assert pairs == set(itertools.product(JOINS, JOINS))


# --- scripted edges: each step checked against DuckDB ----------------------------------------

EDGE_VIEWS = {
    "left": "SELECT * FROM l LEFT JOIN r ON l.k = r.k",
    "full": "SELECT * FROM l FULL JOIN r ON l.k = r.k",
    "filtered": "SELECT * FROM l LEFT JOIN r ON l.k = r.k AND l.x > 1",
    "null_safe": "SELECT * FROM l FULL JOIN r ON l.k IS NOT DISTINCT FROM r.k",
    "never": "SELECT * FROM l FULL JOIN r ON FALSE",
    "unmatched": "SELECT l.k, l.x FROM l LEFT JOIN r ON l.k = r.k WHERE r.k IS NULL",
}


def test_rows_move_between_matched_and_padded() -> None:
    harness = Harness(TABLES, DOMAINS)
    try:
        harness.create_views(EDGE_VIEWS)
        a1, a2, an = (1, 2, "a"), (1, 0, "a"), (None, 3, "a")
        b1, b2, bn = (1, 1, "b"), (1, 2, "b"), (None, 1, "b")
        script = [
            {"l": [("insert", a1), ("insert", a1), ("insert", an)]},  # all padded
            {"r": [("insert", b1), ("insert", bn)]},                   # a1 matched; NULLs never
            {"r": [("insert", b2)]},                                   # a second match
            {"r": [("delete", b1)]},                                   # one match left
            {"r": [("delete", b2)], "l": [("insert", a2)]},            # back to padded, both sides
            {"l": [("update", a1, (2, 5, "a"))], "r": [("insert", b1)]},  # moves and matches
            {"l": [("delete", a1), ("delete", an)]},
            {"r": [("update", b1, (2, 9, "b"))]},                      # the match moves keys
            {"l": [("delete", (2, 5, "a")), ("delete", a2)],
             "r": [("delete", (2, 9, "b")), ("delete", bn)]},          # all gone
        ]
        for i, ops in enumerate(script):
            harness.apply(Epoch.of(ops, variant=i))
    finally:
        harness.close()


def test_views_created_over_existing_rows() -> None:
    harness = Harness(TABLES, DOMAINS)
    try:
        harness.apply(Epoch.of({"l": [("insert", (1, 2, "a")), ("insert", (None, 1, "b"))],
                                "r": [("insert", (1, 1, "a")), ("insert", (3, 1, "c"))]}))
        harness.create_views(EDGE_VIEWS)
        harness.apply(Epoch.of({"r": [("delete", (1, 1, "a"))]}))
    finally:
        harness.close()


def test_using_after_a_full_join_is_refused() -> None:
    # DuckDB matches m.k against COALESCE(l.k, r.k) there; ON says what is meant.
    db = ivm.connect()
    try:
        db.execute(f"{L}; {R}; {M}")
        with pytest.raises(ivm.UnsupportedSQL, match="USING after a RIGHT or FULL JOIN"):
            db.execute("CREATE VIEW v AS SELECT * FROM l FULL JOIN r USING (k) "
                       "JOIN m USING (k)")
        assert not db.views
    finally:
        db.close()


def test_theta_outer_join_runs_in_one_place_and_explain_says_so() -> None:
    db = ivm.connect()
    try:
        db.execute(f"{L}; {R}; CREATE VIEW v AS SELECT * FROM l LEFT JOIN r ON l.x < r.y")
        text = db.explain("v")
        assert "none (nested loop)" in text
        assert "Difference" in text and "IncrementalDistinct" in text
    finally:
        db.close()


def test_equal_subplans_are_one_operator() -> None:
    """The inner join and the anti join read one L operator and one R operator."""
    db = ivm.connect()
    try:
        db.execute(f"{L}; {R}; CREATE VIEW v AS SELECT * FROM l FULL JOIN r ON l.k = r.k")
        text = db.explain("v")
        assert text.count("Source l") == text.count("Source r")
        numbers = {line.split()[0] for line in text.splitlines() if "Source l" in line}
        assert len(numbers) == 1, text
    finally:
        db.close()


# --- Spark mode ------------------------------------------------------------------------------

SPARK_VIEWS = {
    # NULL-safe keys (NULLs hash to one partition on both sides), filters on both sides.
    "keyed": "SELECT * FROM l LEFT JOIN r ON l.k IS NOT DISTINCT FROM r.k AND l.x > 0 "
             "AND r.y <> 5",
    # No key: the join runs on one partition, the semi join's join back to R is keyed.
    "theta": "SELECT * FROM l RIGHT JOIN r ON l.x < r.y",
}
"""Few views: on Spark each stateful operator is a stage, a Spark job per epoch (a LEFT
or RIGHT join is 3 stages and the view's, a FULL join 5 and the view's)."""


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_outer_joins_on_spark(data: st.DataObject, spark: Any,
                              tmp_path_factory: pytest.TempPathFactory) -> None:
    # Spark epochs cost a job per stage: few views, few epochs (the random groups above
    # cover the shapes; this checks that the same plans partition correctly).
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-outer")
    harness = Harness(TABLES, DOMAINS, connect=lambda: ivm.connect(
        directory, spark=spark, partitions=SPARK_PARTITIONS))
    try:
        harness.apply(data.draw(harness.strategy(), label="before the views"))
        harness.create_views(SPARK_VIEWS)
        for i in range(2):
            harness.apply(data.draw(harness.strategy(), label=f"epoch {i + 1}"))
        text = harness.db.explain("theta")
        assert "on one partition" in text, text   # the theta join and its semi join
        assert "by [" in text, text                # the join back to L is keyed
    finally:
        harness.close()
