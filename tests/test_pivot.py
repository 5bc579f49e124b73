"""PIVOT and UNPIVOT with static IN lists, in DuckDB's statement form and the SQL-standard
form in FROM: a GROUP BY with FILTERed aggregates, and a flat map.

Random CDC epochs against DuckDB's recomputation (NULLs in the pivoted column and in
the IN list, several aggregates, several ON columns, implicit and explicit GROUP BY, a
PIVOT over a CTE, UNPIVOT with and without INCLUDE NULLS, COLUMNS(*)), DuckDB's column
names, refusals by name, and Spark mode.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import MODES, Epoch, Harness, run_workload
from oracle.rows import rows
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

SALES = "CREATE TABLE sales (region VARCHAR, quarter INTEGER, amount INTEGER)"
SCORES = "CREATE TABLE scores (id INTEGER PRIMARY KEY, math INTEGER, art INTEGER, tag VARCHAR)"

VIEWS = {
    "by_quarter": "PIVOT sales ON quarter IN (1, 2, NULL) USING sum(amount) GROUP BY region",
    "counts": "PIVOT sales ON quarter IN (1 AS q1, 2 AS q2) USING count(*), "
              "max(amount) AS top",
    "regions": "PIVOT sales ON region IN ('a', 'b'), quarter IN (1, 2) USING sum(amount)",
    "standard": "SELECT * FROM sales PIVOT (sum(amount) AS s FOR quarter IN (1, 2) "
                "GROUP BY region)",
    "implicit": "SELECT p.region, p.\"1\" FROM sales PIVOT (count(amount) FOR quarter IN "
                "(1, 2)) AS p",
    "over_cte": "WITH doubled AS (SELECT region, quarter, amount * 2 AS amount FROM sales) "
                "SELECT * FROM (PIVOT doubled ON quarter IN (1, 2) USING sum(amount) "
                "GROUP BY region) AS d WHERE d.\"1\" IS NOT NULL",
    "long": "UNPIVOT scores ON math, art INTO NAME subject VALUE score",
    "long_nulls": "SELECT * FROM scores UNPIVOT INCLUDE NULLS (score FOR subject IN "
                  "(math AS m, art))",
    "every_column": "UNPIVOT (SELECT id, math, art FROM scores) ON COLUMNS(* EXCLUDE (id))",
    "best": "SELECT subject, max(score) AS best FROM long GROUP BY subject",
}


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_pivot_under_random_cdc(data: st.DataObject) -> None:
    domains = {"sales.region": ("a", "b", "c"), "sales.quarter": (1, 2, 3)}
    run_workload([SALES, SCORES], VIEWS, data, epochs=10, domains=domains,
                 modes=(*MODES, "clear"))


def test_names_and_cells_are_duckdbs() -> None:
    harness = Harness([SALES, SCORES])
    try:
        harness.apply(Epoch.of({
            "sales": [("insert", ("a", 1, 10)), ("insert", ("a", 2, 20)),
                      ("insert", ("b", None, 5)), ("insert", ("c", 3, 1))],
            "scores": [("insert", (1, 90, None, "x"))],
        }))
        harness.create_views({n: VIEWS[n] for n in ("by_quarter", "counts", "long", "standard")})
        read = harness.db.read
        assert read("by_quarter").column_names == ["region", "1", "2", "NULL"]
        # Every group is a row; NULL in the IN list matches NULL.
        assert rows(read("by_quarter")) == [("a", 10, 20, None), ("b", None, None, 5),
                                            ("c", None, None, None)]
        assert read("counts").column_names == ["region", "q1_count_star()", "q1_top",
                                               "q2_count_star()", "q2_top"]
        assert rows(read("counts")) == [("a", 1, 10, 1, 20), ("b", 0, None, 0, None),
                                        ("c", 0, None, 0, None)]
        assert read("standard").column_names == ["region", "1_s", "2_s"]
        # UNPIVOT drops NULL values.
        assert rows(read("long")) == [(1, "x", "math", 90)]
        harness.apply(Epoch.of({"sales": [("delete", ("a", 2, 20))]}))
        assert rows(read("by_quarter"))[0] == ("a", 10, None, None)
    finally:
        harness.close()


@pytest.mark.parametrize(("sql", "construct"), [
    ("PIVOT sales ON quarter USING sum(amount)", "PIVOT without an IN list"),
    ("SELECT * FROM sales PIVOT (sum(amount) FOR quarter IN ANY)", "PIVOT without an IN list"),
    ("UNPIVOT scores ON (math, art) AS both INTO NAME s VALUE a, b", "UNPIVOT of"),
])
def test_what_is_refused_is_named(sql: str, construct: str) -> None:
    with ivm.connect() as db:
        db.execute(f"{SALES}; {SCORES}")
        with pytest.raises((ivm.UnsupportedSQL, ivm.SqlError), match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_pivot_on_spark(data: st.DataObject, spark: Any,
                        tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-pivot")
    names = ("by_quarter", "long")
    run_workload([SALES, SCORES], {n: VIEWS[n] for n in names}, data, epochs=3,
                 domains={"sales.region": ("a", "b", "c"), "sales.quarter": (1, 2, 3)},
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
