"""GROUPING SETS, ROLLUP, CUBE and GROUPING() under random CDC, against DuckDB.

The planner makes one Aggregate per grouping set (NULL for the keys outside it,
constants for GROUPING), so each aggregate class is covered: invertible (COUNT,
SUM, AVG), running (MIN/MAX over DOUBLE) and per-key (COUNT(DISTINCT)). Tables
are emptied often, so the empty grouping set's one row over an empty table (as
DuckDB gives it: COUNT 0, SUM NULL) comes and goes. One group runs in Spark mode.
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

EVENTS = "CREATE TABLE events (k INTEGER, tag VARCHAR, v DOUBLE)"
DOMAINS = {"events.k": (0, 1, 2), "events.tag": ("a", "b"), "events.v": (0.5, -1.0, 2.25)}

MODES = ("one", "one", "one", "empty", "clear", "clear")

CASES: dict[str, dict[str, str]] = {
    "rollup": {
        "invertible": "SELECT k, tag, COUNT(*) AS n, SUM(v) AS s, AVG(k) AS a, "
                      "GROUPING(k) AS gk, GROUPING(k, tag) AS gkt FROM events "
                      "GROUP BY ROLLUP(k, tag)",
        "running": "SELECT k, MIN(v) AS lo, MAX(v) AS hi, GROUPING_ID(k) AS g FROM events "
                   "GROUP BY ROLLUP(k)",
        "per_key": "SELECT tag, COUNT(DISTINCT k) AS nk, COUNT(*) AS n FROM events "
                   "GROUP BY ROLLUP(tag)",
    },
    "cube_and_sets": {
        "cube": "SELECT k, tag, COUNT(*) AS n, MAX(v) AS hi, GROUPING(tag, k) AS g "
                "FROM events GROUP BY CUBE(k, tag)",
        "sets": "SELECT k, tag, SUM(k) AS s, COUNT(DISTINCT v) AS nv FROM events "
                "GROUP BY GROUPING SETS ((k, tag), (tag), ())",
        "empty_only": "SELECT COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM events "
                      "GROUP BY GROUPING SETS (())",
        "mixed": "SELECT k, tag, COUNT(*) AS n FROM events GROUP BY k, ROLLUP(k, tag)",
    },
    "having_and_expressions": {
        "having": "SELECT k, tag, COUNT(*) AS n FROM events GROUP BY CUBE(k, tag) "
                  "HAVING COUNT(*) > 1 AND GROUPING(k) = 0",
        "expressions": "SELECT k % 2 AS parity, upper(tag) AS t, SUM(v) AS s, "
                       "GROUPING(k % 2) AS g FROM events GROUP BY ROLLUP(k % 2, upper(tag))",
        "no_calls": "SELECT k, GROUPING(k) AS g FROM events GROUP BY ROLLUP(k)",
        "over_it": "SELECT g, COUNT(*) AS rows FROM (SELECT k, GROUPING(k, tag) AS g "
                   "FROM events GROUP BY CUBE(k, tag)) AS c GROUP BY g",
    },
}


@pytest.mark.parametrize("case", list(CASES))
@RANDOM_CDC
@given(data=st.data())
def test_grouping_sets(case: str, data: st.DataObject) -> None:
    # One random workload per case (hypothesis' simplest one, a tiny insert per epoch,
    # is skipped: it meets few of the cases).
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    run_workload([EVENTS], CASES[case], data, epochs=10, domains=DOMAINS, modes=MODES)


def test_grouping_sets_over_an_empty_table_by_hand() -> None:
    harness = Harness([EVENTS])
    try:
        # Created over the empty table: only the empty set's row (n 0, s NULL).
        harness.create_views({
            "rollup": "SELECT k, COUNT(*) AS n, SUM(v) AS s, GROUPING(k) AS g FROM events "
                      "GROUP BY ROLLUP(k)",
            "dup_sets": "SELECT k, COUNT(*) AS n FROM events GROUP BY GROUPING SETS ((k), (k))",
        })
        one, two = (1, "a", 0.5), (None, None, None)
        harness.apply(Epoch.of({"events": [("insert", one), ("insert", one),
                                           ("insert", two)]}))
        harness.apply(Epoch.of({"events": [("delete", one)]}))
        harness.apply(Epoch.of({"events": [("delete", one), ("delete", two)]}))
        harness.apply(Epoch.of({"events": [("insert", two)]}))
    finally:
        harness.close()


def test_grouping_of_a_column_that_is_not_grouped_is_an_error() -> None:
    with ivm.connect() as db:
        db.execute(EVENTS)
        with pytest.raises(ivm.SqlError, match="GROUPING"):
            db.execute("CREATE VIEW v AS SELECT k, GROUPING(tag) AS g FROM events "
                       "GROUP BY ROLLUP(k)")
        assert not db.views


SPARK_VIEWS = {
    "rollup": "SELECT k, COUNT(*) AS n, SUM(v) AS s, GROUPING(k) AS g FROM events "
              "GROUP BY ROLLUP(k)",
}


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_grouping_sets_on_spark(data: st.DataObject, spark: Any,
                                tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-grouping-sets")
    run_workload([EVENTS], SPARK_VIEWS, data, epochs=3, domains=DOMAINS, modes=MODES,
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS))
