"""GROUP BY without aggregate calls (a DISTINCT of its keys) wherever a grouped SELECT may
stand, under random CDC against DuckDB.

The planner makes such a GROUP BY a ``Distinct`` over the projection of its keys
(one per grouping set, padded with NULLs as an Aggregate's would be), so HAVING,
expressions over keys, GROUP BY ALL and positions, CTEs, derived tables (the right
side of a LEFT JOIN), IN / EXISTS / scalar subqueries, set operations, views over
views, recursive steps, grouping sets, windows and ORDER BY … LIMIT above it are each
run epoch by epoch. The aggregate operator itself, given no call, is checked in
``tests/ivm/operators/test_aggregate_without_calls.py``. One group runs on Spark.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

TABLES = [
    "CREATE TABLE events (k INTEGER, tag VARCHAR, v DOUBLE)",
    "CREATE TABLE other (k INTEGER, w VARCHAR)",
]
DOMAINS = {
    "events.k": (0, 1, 2, None), "events.tag": ("a", "b", None), "events.v": (0.5, -1.0),
    "other.k": (0, 1, 3, None), "other.w": ("x", "y"),
}
MODES = ("one", "one", "one", "empty", "clear")

CASES: dict[str, dict[str, str]] = {
    "plain": {
        "keys": "SELECT k, tag FROM events GROUP BY k, tag",
        "having": "SELECT k, tag FROM events GROUP BY k, tag HAVING k > 0 OR tag IS NULL",
        "expressions": "SELECT k + 1 AS k1, upper(tag) AS t, k * 2 AS k2, 'c' AS c "
                       "FROM events GROUP BY k, tag",
        "all": "SELECT k, tag FROM events GROUP BY ALL",
        "positions": "SELECT k % 2 AS p, tag FROM events GROUP BY 1, 2",
        "expression_key": "SELECT k % 2 AS p FROM events WHERE v > 0 GROUP BY k % 2",
        "one_key": "SELECT tag FROM events GROUP BY tag",
    },
    "nested": {
        "cte": "WITH g AS (SELECT k, tag FROM events GROUP BY k, tag) "
               "SELECT tag, COUNT(*) AS n FROM g GROUP BY tag",
        "left_join": "SELECT o.k, o.w, g.tag FROM other AS o LEFT JOIN "
                     "(SELECT k, tag FROM events GROUP BY k, tag) AS g ON o.k = g.k",
        "in": "SELECT k, w FROM other WHERE k IN (SELECT k FROM events GROUP BY k)",
        "not_in": "SELECT k, w FROM other WHERE k NOT IN "
                  "(SELECT k FROM events WHERE k IS NOT NULL GROUP BY k)",
        "exists": "SELECT k, w FROM other WHERE EXISTS (SELECT tag FROM events GROUP BY tag)",
        "scalar": "SELECT k, (SELECT tag FROM events WHERE k = 0 AND tag = 'a' GROUP BY tag) "
                  "AS t FROM other",
        "correlated_on_keys": "SELECT k, (SELECT COUNT(*) FROM other AS o WHERE o.k = e.k) "
                              "AS n FROM events AS e GROUP BY k",
    },
    "set_operations": {
        "union_all": "SELECT k FROM events GROUP BY k UNION ALL SELECT k FROM other GROUP BY k",
        "union": "SELECT k FROM events GROUP BY k UNION SELECT k FROM other GROUP BY k, w",
        "intersect": "SELECT k FROM events GROUP BY k INTERSECT SELECT k FROM other GROUP BY k",
        "except": "SELECT k FROM other GROUP BY k EXCEPT SELECT k FROM events GROUP BY k",
    },
    "sets_windows_limits": {
        "grouping_sets": "SELECT k, tag FROM events GROUP BY GROUPING SETS ((k), (tag), (k, tag))",
        "grouping_calls": "SELECT k, tag, GROUPING(k, tag) AS g FROM events "
                          "GROUP BY GROUPING SETS ((k), (tag))",
        "cube": "SELECT k, tag FROM events GROUP BY CUBE (k, tag)",
        "window": "SELECT k, tag, ROW_NUMBER() OVER (PARTITION BY tag ORDER BY k NULLS FIRST) "
                  "AS r, COUNT(*) OVER (PARTITION BY k) AS n FROM events GROUP BY k, tag",
        "top_k": "SELECT k, tag FROM events GROUP BY k, tag "
                 "ORDER BY k NULLS FIRST, tag NULLS FIRST LIMIT 3",
        "distinct_too": "SELECT DISTINCT tag FROM events GROUP BY k, tag",
        "qualify": "SELECT k, tag FROM events GROUP BY k, tag "
                   "QUALIFY ROW_NUMBER() OVER (PARTITION BY tag ORDER BY k NULLS FIRST) <= 1",
        "distinct_on": "SELECT DISTINCT ON (tag) tag, k FROM events GROUP BY k, tag "
                       "ORDER BY tag, k NULLS FIRST",
    },
    "views_and_recursion": {
        "base": "SELECT k, tag FROM events GROUP BY k, tag",
        "over_base": "SELECT k FROM base GROUP BY k",
        "recursive": "WITH RECURSIVE r(n) AS (SELECT k FROM events WHERE k IS NOT NULL "
                     "GROUP BY k UNION SELECT n + 1 FROM r WHERE n < 4 GROUP BY n) "
                     "SELECT n FROM r",
        "recursive_all": "WITH RECURSIVE r(n, d) AS (SELECT k, 0 FROM events WHERE k >= 0 "
                         "UNION ALL SELECT n + 1, d + 1 FROM r WHERE d < 2 GROUP BY n, d) "
                         "SELECT n, d FROM r",
    },
}


@pytest.mark.parametrize("case", list(CASES))
@RANDOM_CDC
@given(data=st.data())
def test_group_by_without_aggregates(case: str, data: st.DataObject) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    run_workload(TABLES, CASES[case], data, epochs=10, domains=DOMAINS, modes=MODES)


def test_group_by_keys_is_planned_as_distinct() -> None:
    with ivm.connect() as db:
        db.execute(TABLES[0])
        db.execute("CREATE VIEW v AS SELECT i, tag FROM (SELECT k AS i, tag FROM events) "
                   "GROUP BY i, tag")
        text = db.explain("v")
        assert "Distinct" in text and "Aggregate" not in text, text


def test_group_by_keys_by_hand() -> None:
    # The issue's own query, and duplicates, NULL keys and deletes crossing zero by hand.
    harness = Harness([TABLES[0]])
    try:
        one, two, empty = (1, "a", 0.5), (1, "a", -1.0), (None, None, None)
        harness.apply(Epoch.of({"events": [("insert", one), ("insert", one),
                                           ("insert", empty)]}))
        harness.create_views({"v": "SELECT k, tag FROM events GROUP BY k, tag",
                              "h": "SELECT k FROM events GROUP BY k HAVING k IS NULL"})
        harness.apply(Epoch.of({"events": [("delete", one), ("insert", two)]}))
        harness.apply(Epoch.of({"events": [("delete", one)]}))
        harness.apply(Epoch.of({"events": [("delete", two), ("delete", empty)]}))
        harness.apply(Epoch.of({"events": [("insert", empty), ("insert", empty)]}))
    finally:
        harness.close()


SPARK_VIEWS = {
    "keys": "SELECT k, tag FROM events GROUP BY k, tag",
    "left_join": "SELECT o.k, o.w, g.tag FROM other AS o LEFT JOIN "
                 "(SELECT k, tag FROM events GROUP BY k, tag) AS g ON o.k = g.k",
    "sets": "SELECT k, tag FROM events GROUP BY GROUPING SETS ((k), (tag))",
}


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_group_by_without_aggregates_on_spark(
    data: st.DataObject, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-group-by-keys")
    run_workload(TABLES, SPARK_VIEWS, data, epochs=3, domains=DOMAINS, modes=MODES,
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS))
