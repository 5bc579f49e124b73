"""Window functions, QUALIFY, named windows and DISTINCT ON under random CDC, checked
against DuckDB after every epoch (``run_workload``, tests/oracle/harness.py).

Every function family (ranks, positions, offsets, picks, aggregates over ROWS, RANGE
and GROUPS frames with EXCLUDE), PARTITION BY expressions and global windows, several
partitions in one SELECT, windows over aggregates, QUALIFY, named windows, DISTINCT ON,
windows over joins and views over windows. The tables have few values per column, so
ORDER BY ties, NULLs in partition and order keys, duplicate rows, partitions emptied and
refilled and rows moving between partitions (updates of the partition key) are common.

Where DuckDB's answer depends on the order of peers, ivm breaks ties by the remaining
columns of the window's input (``ivm.operators.window``; ``ivm.operators.distinct_on``):
the oracle SQL of those views spells that order out. For table ``t`` (g, o, x, s, f)
partitioned by g and ordered by o, the remaining columns are x, s, f.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import MODES, Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

T = "CREATE TABLE t (g INTEGER, o INTEGER, x INTEGER, s VARCHAR, f DOUBLE)"
ITEMS = "CREATE TABLE items (id INTEGER PRIMARY KEY, g INTEGER, x INTEGER)"
LABELS = "CREATE TABLE labels (g INTEGER PRIMARY KEY, name VARCHAR)"

DOMAINS: dict[str, tuple[Any, ...]] = {
    "t.g": (0, 1, 2),          # few partitions: they fill, empty and refill
    "t.o": (0, 1, 2),          # ties in ORDER BY
    "t.x": (0, 1, 2, 3),
    "t.s": ("a", "b"),
    "t.f": (0.5, 1.5, -2.25),
    "items.g": (0, 1, 2),
    "items.x": (0, 1, 2),
    "labels.g": (0, 1, 2),
    "labels.name": ("p", "q"),  # two g's share a name: partitions over the join merge
}

EPOCHS = 12
CASE_CDC = settings(RANDOM_CDC, max_examples=examples(1))

Case = tuple[list[str], dict[str, str], dict[str, str]]

CASES: dict[str, Case] = {
    "ranks": ([T], {
        "ranks": "SELECT g, o, x, RANK() OVER (PARTITION BY g ORDER BY o) AS r, "
                 "DENSE_RANK() OVER (PARTITION BY g ORDER BY o DESC NULLS FIRST) AS dr, "
                 "PERCENT_RANK() OVER (PARTITION BY g ORDER BY o, x) AS pr, "
                 "CUME_DIST() OVER (PARTITION BY g ORDER BY x DESC) AS cd FROM t",
        "by_expression": "SELECT x, s, RANK() OVER (PARTITION BY x % 2 ORDER BY upper(s) "
                         "NULLS FIRST) AS r FROM t",
        # DISTINCT after the windows
        "distinct": "SELECT DISTINCT g, DENSE_RANK() OVER (ORDER BY g) AS dr FROM t",
    }, {}),
    "positions": ([T], {
        "numbers": "SELECT g, o, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY o) AS rn, "
                   "NTILE(2) OVER (PARTITION BY g ORDER BY o DESC) AS half, "
                   "ROW_NUMBER() OVER (PARTITION BY g) AS unordered FROM t",
        "offsets": "SELECT g, o, x, s, LAG(x) OVER (PARTITION BY g ORDER BY o) AS prev, "
                   "LAG(x, 2, -1) OVER (PARTITION BY g ORDER BY o) AS prev2, "
                   "LEAD(s, 1, 'none') OVER (PARTITION BY g ORDER BY o NULLS FIRST) AS next, "
                   "LEAD(x IGNORE NULLS) OVER (PARTITION BY g ORDER BY o) AS next_x FROM t",
    }, {
        "numbers": "SELECT g, o, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY o, x, s, f) AS rn, "
                   "NTILE(2) OVER (PARTITION BY g ORDER BY o DESC, x, s, f) AS half, "
                   "ROW_NUMBER() OVER (PARTITION BY g ORDER BY o, x, s, f) AS unordered FROM t",
        "offsets": "SELECT g, o, x, s, LAG(x) OVER (PARTITION BY g ORDER BY o, x, s, f) AS prev, "
                   "LAG(x, 2, -1) OVER (PARTITION BY g ORDER BY o, x, s, f) AS prev2, "
                   "LEAD(s, 1, 'none') OVER (PARTITION BY g ORDER BY o NULLS FIRST, x, s, f) "
                   "AS next, LEAD(x IGNORE NULLS) OVER (PARTITION BY g ORDER BY o, x, s, f) "
                   "AS next_x FROM t",
    }),
    "picks": ([T], {
        "picks": "SELECT g, o, x, FIRST_VALUE(x) OVER (PARTITION BY g ORDER BY o) AS fv, "
                 "LAST_VALUE(x) OVER (PARTITION BY g ORDER BY o) AS lv, "
                 "NTH_VALUE(s, 2) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN UNBOUNDED "
                 "PRECEDING AND UNBOUNDED FOLLOWING) AS nv, "
                 "FIRST_VALUE(s) OVER (PARTITION BY g) AS any_s FROM t",
        "framed_picks": "SELECT g, o, x, FIRST_VALUE(x) OVER (PARTITION BY g ORDER BY o ROWS "
                        "BETWEEN 1 PRECEDING AND CURRENT ROW) AS f1, "
                        "LAST_VALUE(x IGNORE NULLS) OVER (PARTITION BY g ORDER BY o GROUPS "
                        "BETWEEN CURRENT ROW AND 1 FOLLOWING) AS l1, "
                        "FIRST_VALUE(x) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN 1 "
                        "PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS f2 FROM t",
    }, {
        # The first row by (o, x, s, f) is in every default frame; the last of a frame is
        # the last of the current row's peers.
        "picks": "SELECT g, o, x, FIRST_VALUE(x) OVER (PARTITION BY g ORDER BY o, x, s, f ROWS "
                 "BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS fv, "
                 "LAST_VALUE(x) OVER (PARTITION BY g, o ORDER BY x, s, f ROWS BETWEEN "
                 "UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS lv, "
                 "NTH_VALUE(s, 2) OVER (PARTITION BY g ORDER BY o, x, s, f ROWS BETWEEN "
                 "UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS nv, "
                 "FIRST_VALUE(s) OVER (PARTITION BY g ORDER BY o, x, s, f ROWS BETWEEN "
                 "UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS any_s FROM t",
        "framed_picks": "SELECT g, o, x, FIRST_VALUE(x) OVER (PARTITION BY g ORDER BY o, x, s, f "
                        "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS f1, "
                        "LAST_VALUE(x ORDER BY o, x, s, f IGNORE NULLS) OVER (PARTITION BY g "
                        "ORDER BY o GROUPS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS l1, "
                        "FIRST_VALUE(x ORDER BY o, x, s, f) OVER (PARTITION BY g ORDER BY o "
                        "RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS f2 "
                        "FROM t",
    }),
    "aggregates": ([T], {
        "frames": "SELECT g, o, x, SUM(x) OVER (PARTITION BY g ORDER BY o) AS run, "
                  "COUNT(*) OVER (PARTITION BY g) AS n, "
                  "AVG(f) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN 1 PRECEDING AND "
                  "1 FOLLOWING) AS af, "
                  "MIN(s) OVER (PARTITION BY g ORDER BY o GROUPS BETWEEN 1 PRECEDING AND "
                  "CURRENT ROW EXCLUDE GROUP) AS ms, "
                  "MAX(x) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN CURRENT ROW AND "
                  "UNBOUNDED FOLLOWING EXCLUDE TIES) AS mx, "
                  "COUNT(x) OVER (PARTITION BY g ORDER BY o DESC RANGE BETWEEN UNBOUNDED "
                  "PRECEDING AND 1 PRECEDING) AS before FROM t",
        "rows_frames": "SELECT g, o, x, SUM(x) OVER (PARTITION BY g ORDER BY o ROWS BETWEEN "
                       "1 PRECEDING AND CURRENT ROW) AS pair, "
                       "COUNT(*) OVER (PARTITION BY g ROWS BETWEEN UNBOUNDED PRECEDING AND "
                       "CURRENT ROW) AS pos, "
                       "MAX(s) OVER (PARTITION BY g ORDER BY o ROWS BETWEEN CURRENT ROW AND "
                       "2 FOLLOWING EXCLUDE CURRENT ROW) AS ahead FROM t",
        "other_calls": "SELECT g, x, s, STRING_AGG(s, ',' ORDER BY s) OVER (PARTITION BY g "
                       "ORDER BY o) AS ss, LIST(x ORDER BY x DESC) OVER (PARTITION BY g) AS xs, "
                       "COUNT(DISTINCT x) OVER (PARTITION BY g ORDER BY o) AS cd, "
                       "SUM(x) FILTER (WHERE s <> 'a') OVER (PARTITION BY g) AS sf, "
                       "MEDIAN(f) OVER (PARTITION BY g ORDER BY o) AS md, "
                       "STDDEV_SAMP(x) OVER (PARTITION BY g) AS sd, "
                       "BOOL_OR(x > 2) OVER (PARTITION BY g ORDER BY o) AS big FROM t",
    }, {
        "rows_frames": "SELECT g, o, x, SUM(x) OVER (PARTITION BY g ORDER BY o, x, s, f ROWS "
                       "BETWEEN 1 PRECEDING AND CURRENT ROW) AS pair, "
                       "COUNT(*) OVER (PARTITION BY g ORDER BY o, x, s, f ROWS BETWEEN "
                       "UNBOUNDED PRECEDING AND CURRENT ROW) AS pos, "
                       "MAX(s) OVER (PARTITION BY g ORDER BY o, x, s, f ROWS BETWEEN CURRENT "
                       "ROW AND 2 FOLLOWING EXCLUDE CURRENT ROW) AS ahead FROM t",
    }),
    "global": ([T], {
        "global": "SELECT g, x, RANK() OVER (ORDER BY x DESC) AS r, SUM(x) OVER () AS total, "
                  "ROW_NUMBER() OVER (ORDER BY x) AS rn, "
                  "CUME_DIST() OVER (ORDER BY g NULLS FIRST) AS cd FROM t",
    }, {
        "global": "SELECT g, x, RANK() OVER (ORDER BY x DESC) AS r, SUM(x) OVER () AS total, "
                  "ROW_NUMBER() OVER (ORDER BY x, g, o, s, f) AS rn, "
                  "CUME_DIST() OVER (ORDER BY g NULLS FIRST) AS cd FROM t",
    }),
    "stacked": ([T], {
        # Three partitionings, stacked: a later window's ties are broken by the earlier
        # windows' values too (they are columns of its input).
        "stacked": "SELECT g, o, x, RANK() OVER (PARTITION BY g ORDER BY x) AS r, "
                   "SUM(x) OVER (PARTITION BY o) AS so, COUNT(*) OVER () AS n, "
                   "ROW_NUMBER() OVER (PARTITION BY g ORDER BY x) AS rg, "
                   "ROW_NUMBER() OVER (PARTITION BY o ORDER BY x) AS ro FROM t",
    }, {
        "stacked": "SELECT g, o, x, r, so, COUNT(*) OVER () AS n, rg, ro FROM ("
                   "SELECT *, SUM(x) OVER (PARTITION BY o) AS so, ROW_NUMBER() OVER "
                   "(PARTITION BY o ORDER BY x, g, s, f, r, rg) AS ro FROM ("
                   "SELECT *, RANK() OVER (PARTITION BY g ORDER BY x) AS r, ROW_NUMBER() OVER "
                   "(PARTITION BY g ORDER BY x, o, s, f) AS rg FROM t))",
    }),
    "qualify": ([T], {
        "top_two": "SELECT g, x, s FROM t "
                   "QUALIFY ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC) <= 2",
        "best": "SELECT g, o, x, RANK() OVER (PARTITION BY o ORDER BY x DESC) AS r FROM t "
                "WHERE x > 0 QUALIFY r = 1 AND COUNT(*) OVER (PARTITION BY o) > 1",
        "derived_top": "SELECT * FROM (SELECT g, x, DENSE_RANK() OVER (PARTITION BY g ORDER BY "
                       "x DESC) AS r FROM t) AS ranked WHERE r <= 2",
        # QUALIFY, then the query's ORDER BY … LIMIT (a TopK over the window's rows)
        "limited": "SELECT g, o, x, RANK() OVER (PARTITION BY g ORDER BY x) AS r FROM t "
                   "QUALIFY r <= 2 ORDER BY r DESC, g, o, x LIMIT 3",
    }, {
        "top_two": "SELECT g, x, s FROM t "
                   "QUALIFY ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC, o, s, f) <= 2",
    }),
    "named": ([T], {
        "named": "SELECT g, o, x, RANK() OVER w AS r, "
                 "SUM(x) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s2, "
                 "LAG(x) OVER w2 AS prev, COUNT(*) OVER p AS n, "
                 "CUME_DIST() OVER (p ORDER BY o DESC) AS cd FROM t "
                 "WINDOW p AS (PARTITION BY g), w AS (PARTITION BY g ORDER BY o), "
                 "w2 AS (p ORDER BY x)",
    }, {
        "named": "SELECT g, o, x, RANK() OVER (PARTITION BY g ORDER BY o) AS r, "
                 "SUM(x) OVER (PARTITION BY g ORDER BY o, x, s, f ROWS BETWEEN 1 PRECEDING "
                 "AND CURRENT ROW) AS s2, LAG(x) OVER (PARTITION BY g ORDER BY x, o, s, f) "
                 "AS prev, COUNT(*) OVER (PARTITION BY g) AS n, "
                 "CUME_DIST() OVER (PARTITION BY g ORDER BY o DESC) AS cd FROM t",
    }),
    "over_aggregates": ([T], {
        "shares": "SELECT g, SUM(x) AS sx, SUM(SUM(x)) OVER () AS total, "
                  "RANK() OVER (ORDER BY COUNT(*) DESC) AS r, "
                  "SUM(x) * 1.0 / SUM(SUM(x)) OVER () AS share FROM t GROUP BY g",
        # o is unique per group: no ties.
        "lagged": "SELECT o, COUNT(*) AS n, LAG(COUNT(*)) OVER (ORDER BY o) AS prev, "
                  "SUM(COUNT(*)) OVER (ORDER BY o ROWS UNBOUNDED PRECEDING) AS cum "
                  "FROM t GROUP BY o",
        "having_qualify": "SELECT g, o, COUNT(*) AS n FROM t GROUP BY g, o HAVING COUNT(*) > 0 "
                          "QUALIFY ROW_NUMBER() OVER (PARTITION BY g ORDER BY COUNT(*) DESC) = 1",
        "rollup": "SELECT g, o, SUM(x) AS sx, RANK() OVER (PARTITION BY GROUPING(o) "
                  "ORDER BY SUM(x) DESC) AS r FROM t GROUP BY ROLLUP (g, o)",
    }, {
        # The window's input is the aggregate's rows (g, o, n): ties broken by o.
        "having_qualify": "SELECT g, o, COUNT(*) AS n FROM t GROUP BY g, o "
                          "QUALIFY ROW_NUMBER() OVER (PARTITION BY g ORDER BY COUNT(*) DESC, o) "
                          "= 1",
    }),
    "distinct_on": ([T], {
        "first_by": "SELECT DISTINCT ON (g) g, o, x FROM t ORDER BY g, x DESC",
        "unordered": "SELECT DISTINCT ON (g, o) g, o, x AS y FROM t",
        "expression": "SELECT DISTINCT ON (x % 2) x % 2 AS parity, s, x FROM t "
                      "ORDER BY parity, s NULLS FIRST",
        "grouped": "SELECT DISTINCT ON (g) g, o, COUNT(*) AS n FROM t GROUP BY g, o "
                   "ORDER BY g, n DESC",
        "with_window": "SELECT DISTINCT ON (g) g, x, SUM(x) OVER (PARTITION BY g ORDER BY o) "
                       "AS run FROM t ORDER BY g, run DESC",
        # ORDER BY picks each key's row, then the top two keys (a TopK after DISTINCT ON)
        "limited": "SELECT DISTINCT ON (g) g, x FROM t ORDER BY g DESC, o DESC LIMIT 2",
    }, {
        "first_by": "SELECT DISTINCT ON (g) g, o, x FROM t ORDER BY g, x DESC, o, s, f",
        "unordered": "SELECT DISTINCT ON (g, o) g, o, x AS y FROM t ORDER BY x, s, f",
        "expression": "SELECT DISTINCT ON (x % 2) x % 2 AS parity, s, x FROM t "
                      "ORDER BY parity, s NULLS FIRST, g, o, x, f",
        "grouped": "SELECT DISTINCT ON (g) g, o, COUNT(*) AS n FROM t GROUP BY g, o "
                   "ORDER BY g, n DESC, o",
        "with_window": "SELECT DISTINCT ON (g) g, x, SUM(x) OVER (PARTITION BY g ORDER BY o) "
                       "AS run FROM t ORDER BY g, run DESC, o, x, s, f",
        "limited": "SELECT DISTINCT ON (g) g, x FROM t ORDER BY g DESC, o DESC, x, s, f LIMIT 2",
    }),
    "moving": ([ITEMS, LABELS], {
        # Updates change g: rows move between partitions.
        "ranked_items": "SELECT id, g, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC) "
                        "AS rn, LAG(id) OVER (PARTITION BY g ORDER BY x) AS prev FROM items",
        "most": "SELECT g, MAX(rn) AS most, COUNT(*) AS n FROM ranked_items GROUP BY g",
        "over_join": "SELECT i.id, l.name, RANK() OVER (PARTITION BY l.name ORDER BY i.x) AS r, "
                     "SUM(i.x) OVER (PARTITION BY l.name) AS sx "
                     "FROM items i JOIN labels l ON i.g = l.g",
    }, {
        "ranked_items": "SELECT id, g, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC, id) "
                        "AS rn, LAG(id) OVER (PARTITION BY g ORDER BY x, id) AS prev FROM items",
    }),
}


@pytest.mark.parametrize("case", list(CASES))
@CASE_CDC
@given(data=st.data())
def test_window_case(case: str, data: st.DataObject) -> None:
    # Hypothesis' first example is its simplest (one row inserted again and again): run one
    # random workload instead.
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    tables, views, oracle = CASES[case]
    run_workload(tables, views, data, epochs=EPOCHS, domains=DOMAINS, oracle=oracle,
                 modes=(*MODES, "clear"))


# --- scripted edge cases ------------------------------------------------------------------


def _row(g: int | None, o: int | None, x: int | None, s: str | None = "a",
         f: float | None = 0.5) -> tuple[Any, ...]:
    return (g, o, x, s, f)


def test_one_insert_shifts_every_rank_of_a_global_window() -> None:
    with ivm.connect() as db:
        db.execute(f"{T}; CREATE VIEW r AS SELECT x, RANK() OVER (ORDER BY x) AS r FROM t")
        db.ingest("t", [dict(zip("goxsf", _row(1, 1, x), strict=True)) for x in (1, 2, 3)])
        delta = db.ingest("t", [dict(zip("goxsf", _row(2, 2, 0), strict=True))])["r"]
        changed = sorted(zip(delta["x"].to_pylist(), delta["r"].to_pylist(),
                             delta["__w"].to_pylist(), strict=True))
        # every old rank leaves, every row comes back one rank lower, and the new row enters
        assert changed == [(0, 1, 1), (1, 1, -1), (1, 2, 1), (2, 2, -1), (2, 3, 1),
                           (3, 3, -1), (3, 4, 1)]
        assert "(global)" in db.explain("r")


def test_copies_are_numbered_and_one_copy_leaves() -> None:
    harness = Harness([T], DOMAINS)
    views = {"numbered": "SELECT g, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x) AS rn, "
                         "RANK() OVER (PARTITION BY g ORDER BY x) AS r FROM t"}
    oracle = {"numbered": "SELECT g, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x, o, s, f) "
                          "AS rn, RANK() OVER (PARTITION BY g ORDER BY x) AS r FROM t"}
    a, b = _row(1, 0, 5), _row(1, 0, 2)
    try:
        harness.create_views(views, oracle)
        harness.apply(Epoch.of({"t": [("insert", a)] * 3 + [("insert", b)]}))
        assert sorted(harness.db.read("numbered").to_pylist(), key=lambda r: r["rn"]) == [
            {"g": 1, "x": 2, "rn": 1, "r": 1}, {"g": 1, "x": 5, "rn": 2, "r": 2},
            {"g": 1, "x": 5, "rn": 3, "r": 2}, {"g": 1, "x": 5, "rn": 4, "r": 2}]
        harness.apply(Epoch.of({"t": [("delete", a), ("delete", b)]}, fmt="debezium"))
        assert sorted(r["rn"] for r in harness.db.read("numbered").to_pylist()) == [1, 2]
    finally:
        harness.close()


def test_partitions_vanish_refill_and_rows_move() -> None:
    harness = Harness([T], DOMAINS)
    views = {
        "lagged": "SELECT g, x, LAG(x) OVER (PARTITION BY g ORDER BY x) AS prev, "
                  "COUNT(*) OVER (PARTITION BY g) AS n FROM t",
        "firsts": "SELECT DISTINCT ON (g) g, x FROM t ORDER BY g, x DESC",
    }
    a, b, c = _row(None, 0, 1), _row(None, 1, 2), _row(1, 0, 3)
    script = [
        {"t": [("insert", a), ("insert", b), ("insert", c)]},  # a NULL partition
        {"t": [("delete", c)]},                                  # partition 1 vanishes
        {"t": [("update", a, (1, 0, 1, "a", 0.5))]},             # a moves: NULL → 1
        {"t": [("update", b, (1, 1, 2, "b", 0.5))]},             # the NULL partition vanishes
        {"t": [("delete", (1, 0, 1, "a", 0.5)), ("delete", (1, 1, 2, "b", 0.5))]},  # empty
        {"t": [("insert", c), ("insert", c)]},                   # refilled, with a copy
    ]
    try:
        harness.create_views(views)
        for i, ops in enumerate(script):
            harness.apply(Epoch.of(ops, fmt=("weighted", "delta", "rows")[i % 3], variant=i))
    finally:
        harness.close()


def test_view_created_over_existing_rows_and_reopened(tmp_path: Any) -> None:
    harness = Harness([T], DOMAINS, connect=lambda: ivm.connect(tmp_path / "state"))
    try:
        harness.apply(Epoch.of({"t": [("insert", _row(g, o, x)) for g in (0, 1)
                                      for o in (0, 1) for x in (1, 2)]}))
        harness.create_views(
            {"top": "SELECT g, o, x FROM t QUALIFY DENSE_RANK() OVER (PARTITION BY g "
                    "ORDER BY o DESC) = 1"})
        harness.reopen()
        harness.apply(Epoch.of({"t": [("insert", _row(0, 2, 0)), ("delete", _row(1, 1, 2))]}))
    finally:
        harness.close()


# --- refusals -----------------------------------------------------------------------------

REFUSED = {
    "window_in_order_by": ("SELECT g, x FROM t ORDER BY ROW_NUMBER() OVER (ORDER BY x)",
                           ivm.UnsupportedSQL, "window function in ORDER BY"),
    "window_in_where": ("SELECT g FROM t WHERE RANK() OVER (ORDER BY x) = 1",
                        ivm.SqlError, "window function in WHERE"),
    "nested_window": ("SELECT SUM(RANK() OVER (ORDER BY x)) OVER () FROM t",
                      ivm.SqlError, "inside a window function"),
    "rows_exclude_ties": ("SELECT SUM(x) OVER (ORDER BY o ROWS BETWEEN 1 PRECEDING AND "
                          "CURRENT ROW EXCLUDE TIES) FROM t",
                          ivm.UnsupportedSQL, "ROWS frame with EXCLUDE TIES"),
    "mode_over_window": ("SELECT MODE(x) OVER (PARTITION BY g) FROM t",
                         ivm.UnsupportedSQL, "MODE over a window"),
    "arg_min_over_window": ("SELECT ARG_MIN(s, x) OVER () FROM t",
                            ivm.UnsupportedSQL, "ARG_MIN over a window"),
    "unordered_list": ("SELECT STRING_AGG(s, ',') OVER (PARTITION BY g) FROM t",
                       ivm.UnsupportedSQL, "STRING_AGG without ORDER BY"),
    "ordered_row_number": ("SELECT FIRST_VALUE(x ORDER BY o) OVER (PARTITION BY g) FROM t",
                           ivm.UnsupportedSQL, "FIRST_VALUE with these arguments"),
    "unknown_aggregate": ("SELECT ANY_VALUE(x) OVER (PARTITION BY g) FROM t",
                          ivm.UnsupportedSQL, "ANY_VALUE"),
    "correlated": ("SELECT g, (SELECT MAX(r) FROM (SELECT RANK() OVER (ORDER BY u.x) AS r "
                   "FROM t AS u WHERE u.g = t.g)) AS m FROM t",
                   ivm.UnsupportedSQL, "correlated"),
    "correlated_qualify": ("SELECT g FROM t WHERE EXISTS (SELECT 1 FROM t AS u WHERE u.g = t.g "
                           "QUALIFY ROW_NUMBER() OVER (ORDER BY u.x) = 1)",
                           ivm.UnsupportedSQL, "QUALIFY in a correlated subquery"),
    "unknown_window": ("SELECT SUM(x) OVER nope FROM t", ivm.SqlError, "nope"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_by_name(case: str) -> None:
    sql, error, construct = REFUSED[case]
    with ivm.connect() as db:
        db.execute(T)
        with pytest.raises(error) as caught:
            db.execute(f"CREATE VIEW v AS {sql}")
        assert construct.lower() in str(caught.value).lower(), caught.value
        assert not db.views


# --- Spark mode ---------------------------------------------------------------------------

SPARK_VIEWS = {
    "partitioned": "SELECT g, o, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY o) AS rn, "
                   "SUM(x) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN 1 PRECEDING AND "
                   "CURRENT ROW) AS s FROM t",
    "global": "SELECT g, x, RANK() OVER (ORDER BY x DESC) AS r FROM t "
              "QUALIFY r <= 3",
    "firsts": "SELECT DISTINCT ON (g) g, x, s FROM t ORDER BY g, x DESC",
}
SPARK_ORACLE = {
    "partitioned": "SELECT g, o, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY o, x, s, f) "
                   "AS rn, SUM(x) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN 1 PRECEDING AND "
                   "CURRENT ROW) AS s FROM t",
    "firsts": "SELECT DISTINCT ON (g) g, x, s FROM t ORDER BY g, x DESC, o, s, f",
}


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_windows_on_spark(data: st.DataObject, spark: Any,
                          tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-windows")

    def connect() -> Any:
        return ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS)

    run_workload([T], SPARK_VIEWS, data, epochs=3, domains=DOMAINS, oracle=SPARK_ORACLE,
                  connect=connect)
    with connect() as db:
        plan = db.explain("global")
        assert "on one partition" in plan, plan
        assert "by [t.g]" in db.explain("partitioned")
