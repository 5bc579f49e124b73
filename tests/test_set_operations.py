"""INTERSECT [ALL], EXCEPT [ALL] and UNION [ALL] BY NAME under random CDC, against DuckDB.

Two tables without keys share their column types and draw from tiny value
domains (NULL included), so the same row often sits in both, several times, and
its counts cross zero on either side: every epoch's result is compared with
DuckDB's recomputation (tests/oracle/harness.py). Hand-written epochs pin the
bag semantics (EXCEPT ALL with more copies on the right, INTERSECT ALL counts,
NULL rows) and DuckDB's precedence; one group runs in Spark mode.
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

LEFT = "CREATE TABLE l (k INTEGER, s VARCHAR)"
RIGHT = "CREATE TABLE r (k INTEGER, s VARCHAR)"
THIRD = "CREATE TABLE m (k BIGINT, x DOUBLE)"
TABLES = [LEFT, RIGHT, THIRD]
DOMAINS = {"l.k": (0, 1, 2), "r.k": (0, 1, 2), "m.k": (0, 1, 2), "l.s": ("a", "b"),
           "r.s": ("a", "b"), "m.x": (0.0, 1.0, 2.5)}


CASES: dict[str, dict[str, str]] = {
    "bag": {
        "intersect_all": "SELECT k, s FROM l INTERSECT ALL SELECT k, s FROM r",
        "except_all": "SELECT k, s FROM l EXCEPT ALL SELECT k, s FROM r",
        "except_all_reversed": "SELECT * FROM r EXCEPT ALL SELECT * FROM l",
    },
    "set": {
        "intersect": "SELECT k, s FROM l INTERSECT SELECT k, s FROM r",
        "except": "SELECT k, s FROM l EXCEPT SELECT k, s FROM r",
        "one_column": "SELECT s FROM l EXCEPT SELECT s FROM r WHERE k > 0",
    },
    "nested": {
        # DuckDB's precedence: INTERSECT first, then UNION / EXCEPT from the left.
        "precedence": "SELECT k FROM l UNION SELECT k FROM r INTERSECT SELECT k FROM m",
        "except_intersect": "SELECT k FROM l EXCEPT SELECT k FROM r INTERSECT SELECT k FROM m",
        "all_chain": "SELECT k FROM l UNION ALL SELECT k FROM r EXCEPT ALL SELECT k FROM m",
        "parenthesized": "SELECT k FROM l EXCEPT ALL (SELECT k FROM r INTERSECT ALL "
                         "SELECT k FROM l)",
        "widened": "SELECT k FROM l INTERSECT ALL SELECT x FROM m",
    },
    "composed": {
        "in_cte": "WITH c AS (SELECT k, s FROM l EXCEPT ALL SELECT k, s FROM r) "
                  "SELECT s, COUNT(*) AS n FROM c GROUP BY s",
        "in_from": "SELECT t.k + 1 AS k1, t.s FROM (SELECT k, s FROM l INTERSECT SELECT k, s "
                   "FROM r) AS t WHERE t.s IS NOT NULL",
        "both_base": "SELECT k, s FROM l INTERSECT ALL SELECT k, s FROM r",
        "on_a_view": "SELECT k FROM both_base EXCEPT SELECT k FROM m",
        "of_aggregates": "SELECT k, COUNT(*) AS n FROM l GROUP BY k "
                         "INTERSECT SELECT k, COUNT(*) FROM r GROUP BY k",
    },
    "by_name": {
        "union_by_name": "SELECT k, s FROM l UNION BY NAME SELECT x, k FROM m",
        "union_all_by_name": "SELECT s, k FROM l UNION ALL BY NAME SELECT k AS K, s FROM r",
        "widening_by_name": "SELECT k FROM l UNION ALL BY NAME SELECT k, x FROM m",
    },
}


@pytest.mark.parametrize("case", list(CASES))
@RANDOM_CDC
@given(data=st.data())
def test_set_operation(case: str, data: st.DataObject) -> None:
    # One random workload per case (hypothesis' simplest one, a tiny insert per epoch,
    # is skipped: it meets few of the cases).
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    run_workload(TABLES, CASES[case], data, epochs=10, domains=DOMAINS,
                 modes=("one", "one", "several", "several", "several", "clear"))


@RANDOM_CDC
@given(data=st.data())
def test_set_operation_state_survives_reopening(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("setops-reopen")
    run_workload(TABLES, {**CASES["bag"], "except": CASES["set"]["except"]}, data, epochs=6,
                 domains=DOMAINS,
                 modes=("one", "several"), connect=lambda: ivm.connect(directory),
                 reopen_every=3)


def _row(k: int | None, s: str | None) -> tuple[int | None, str | None]:
    return (k, s)


EDGE_VIEWS = {
    "except_all": "SELECT k, s FROM l EXCEPT ALL SELECT k, s FROM r",
    "intersect_all": "SELECT k, s FROM l INTERSECT ALL SELECT k, s FROM r",
    "intersect": "SELECT k, s FROM l INTERSECT SELECT k, s FROM r",
    "except": "SELECT k, s FROM l EXCEPT SELECT k, s FROM r",
    "precedence": "SELECT k FROM l UNION SELECT k FROM r INTERSECT SELECT k FROM m",
}


def test_bag_semantics_by_hand() -> None:
    a, n = _row(1, "a"), _row(None, None)
    harness = Harness(TABLES)
    try:
        harness.create_views(EDGE_VIEWS)
        script = [
            # three copies left, one right: EXCEPT ALL 2, INTERSECT ALL 1
            {"l": [("insert", a)] * 3, "r": [("insert", a)]},
            # more copies on the right than on the left: EXCEPT ALL 0, INTERSECT ALL 3
            {"r": [("insert", a)] * 4},
            # NULL rows match NULL rows
            {"l": [("insert", n), ("insert", n)], "r": [("insert", n)]},
            # both sides cross zero in one epoch
            {"l": [("delete", a)] * 3 + [("insert", _row(2, "b"))],
             "r": [("delete", a)] * 5 + [("insert", _row(2, "b"))]},
            {"r": [("delete", n)], "m": [("insert", (2, 0.0)), ("insert", (1, 1.0))]},
            {"l": [("update", n, _row(1, None))], "r": [("insert", _row(1, None))]},
        ]
        for ops in script:
            harness.apply(Epoch.of(ops))
    finally:
        harness.close()


def test_duckdb_precedence_and_counts_are_what_the_tests_assume() -> None:
    # The oracle is DuckDB; this pins that the edge cases above mean what they say.
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE l AS SELECT * FROM (VALUES (1), (1), (1), (NULL)) t(k)")
    con.execute("CREATE TABLE r AS SELECT * FROM (VALUES (1), (NULL), (NULL), (3)) t(k)")
    con.execute("CREATE TABLE m AS SELECT * FROM (VALUES (3)) t(k)")
    rows = con.sql("SELECT k FROM l EXCEPT ALL SELECT k FROM r").fetchall()
    assert sorted(rows) == [(1,), (1,)]
    rows = con.sql("SELECT k FROM r EXCEPT ALL SELECT k FROM l").fetchall()
    assert sorted(rows, key=str) == [(3,), (None,)]
    rows = con.sql("SELECT k FROM l UNION SELECT k FROM r INTERSECT SELECT k FROM m").fetchall()
    assert sorted(rows, key=str) == [(1,), (3,), (None,)]


@pytest.mark.parametrize("sql", [
    "SELECT k FROM l INTERSECT SELECT k, s FROM r",   # column counts differ
    "SELECT k FROM l EXCEPT BY NAME SELECT k FROM r",  # DuckDB has no EXCEPT BY NAME
])
def test_invalid_set_operations_are_sql_errors(sql: str) -> None:
    with ivm.connect() as db:
        db.execute(LEFT)
        db.execute(RIGHT)
        with pytest.raises(ivm.SqlError):
            db.execute(f"CREATE VIEW v AS {sql}")
        assert not db.views


SPARK_VIEWS = {
    "intersect_all": CASES["bag"]["intersect_all"],
    "except": CASES["set"]["except"],
}


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_set_operations_on_spark(data: st.DataObject, spark: Any,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-setops")
    run_workload(TABLES, SPARK_VIEWS, data, epochs=3, domains=DOMAINS,
                 modes=("several",),
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS))
