"""ASOF JOIN (event time) under random CDC, against DuckDB.

Tiny value domains make trades (``t``) and quotes (``q``) tie on time, repeat, arrive
late and out of order, carry NULL keys and times, and get deleted and updated on both
sides. Where several quotes share the nearest time DuckDB picks one arbitrarily; ivm
takes the first by the quote's other columns (ascending, NULLs last), so each view's
oracle is an independent formulation of that rule: the inner or left join on the keys
and the inequality, ranked per trade row (``rowid``) by time, then the quote's columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.operators import asof_indexed, asof_join, asof_reads, time_index

TABLES = ["CREATE TABLE t (s INTEGER, ts INTEGER, id INTEGER)",
          "CREATE TABLE q (s INTEGER, ts INTEGER, p INTEGER)"]
DOMAINS = {"t.s": (1, 2, None), "t.ts": (1, 2, 3, 4, 5, 6, None), "t.id": (0, 1, 2, 3),
           "q.s": (1, 2, None), "q.ts": (1, 2, 3, 4, 5, 6, None), "q.p": (None, 1, 2, 3)}


def ranked(select: str, join: str, on: str, nearest: str) -> str:
    """Oracle: ``select`` over each trade row's nearest quote (ties by the quote's other
    columns in order: s, which only a view without keys can see differ, then p)."""
    return (
        f"SELECT {select} FROM (SELECT t.s AS t_s, t.ts AS t_ts, t.id AS t_id, q.s AS q_s, "
        f"q.ts AS q_ts, q.p AS q_p, ROW_NUMBER() OVER (PARTITION BY t.rowid ORDER BY "
        f"q.ts {nearest}, q.s ASC NULLS LAST, q.p ASC NULLS LAST) AS rn "
        f"FROM t {join} q ON {on}) AS x WHERE rn = 1"
    )


VIEWS = {
    "ge": ("SELECT t.id, t.ts, q.p FROM t ASOF JOIN q ON t.s = q.s AND t.ts >= q.ts",
           ranked("t_id AS id, t_ts AS ts, q_p AS p", "JOIN", "t.s = q.s AND t.ts >= q.ts",
                  "DESC")),
    "gt_left": ("SELECT t.id, q.p, q.ts AS qts FROM t ASOF LEFT JOIN q "
                "ON t.s = q.s AND t.ts > q.ts",
                ranked("t_id AS id, q_p AS p, q_ts AS qts", "LEFT JOIN",
                       "t.s = q.s AND t.ts > q.ts", "DESC")),
    "le": ("SELECT t.id, q.p FROM t ASOF JOIN q ON t.s = q.s AND t.ts <= q.ts",
           ranked("t_id AS id, q_p AS p", "JOIN", "t.s = q.s AND t.ts <= q.ts", "ASC")),
    "lt_left": ("SELECT t.id, t.s, q.p FROM t ASOF LEFT JOIN q ON q.ts > t.ts AND q.s = t.s",
                ranked("t_id AS id, t_s AS s, q_p AS p", "LEFT JOIN",
                       "t.s = q.s AND t.ts < q.ts", "ASC")),
    "using": ("SELECT * FROM t ASOF JOIN q USING (s, ts)",
              ranked("t_s AS s, t_ts AS ts, t_id AS id, q_p AS p", "JOIN",
                     "t.s = q.s AND t.ts >= q.ts", "DESC")),
    "no_keys": ("SELECT t.id, q.p FROM t ASOF LEFT JOIN q ON t.ts >= q.ts",
                ranked("t_id AS id, q_p AS p", "LEFT JOIN", "t.ts >= q.ts", "DESC")),
    "grouped": ("SELECT q.p, COUNT(*) AS n FROM t ASOF JOIN q ON t.s = q.s AND t.ts >= q.ts "
                "GROUP BY q.p",
                "SELECT p, COUNT(*) AS n FROM (" + ranked(
                    "q_p AS p", "JOIN", "t.s = q.s AND t.ts >= q.ts", "DESC") + ") GROUP BY p"),
}
GROUPS = {"inner": ["ge", "le", "using", "grouped"], "left": ["gt_left", "lt_left", "no_keys"]}


def _views(names: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    return {n: VIEWS[n][0] for n in names}, {n: VIEWS[n][1] for n in names}


@pytest.mark.parametrize("reads", ["time index", "time index, levels merged", "pairwise",
                                   "sorted"])
@pytest.mark.parametrize("group", list(GROUPS))
@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_asof_join(group: str, reads: str, data: st.DataObject) -> None:
    # Embedded, an epoch reads both sides through their time indexes; without them (Spark,
    # times without a code) in SQL, where a changed quote's neighbours come from a hash
    # join when its symbol has few changes, from an ASOF join when it has many: force each.
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    with pytest.MonkeyPatch.context() as patch:
        if reads == "time index, levels merged":  # a new base every few changed points
            patch.setattr(time_index, "MERGE_MIN", 3)
        elif reads != "time index":
            patch.setattr(asof_join, "indexable", lambda node: False)
            limit = asof_reads.PAIRWISE_CHANGES if reads == "pairwise" else -1
            patch.setattr(asof_reads, "PAIRWISE_CHANGES", limit)
        _asof_workload(group, data)


def _asof_workload(group: str, data: st.DataObject) -> None:
    views, oracle = _views(GROUPS[group])
    run_workload(TABLES, views, data, epochs=8, domains=DOMAINS, oracle=oracle, warmup=2,
                 max_ops=8, modes=("one", "several", "several", "several", "clear"))


def test_late_quotes_and_ties_by_hand() -> None:
    harness = Harness(TABLES, DOMAINS)
    try:
        views, oracle = _views(["ge", "gt_left", "le"])
        harness.create_views(views, oracle)
        for ops in [
            # a quote inserted and deleted stays in the trace until compaction: it must not
            # count as a neighbour when the quote after it leaves
            {"t": [("insert", (2, 1, 3))], "q": [("insert", (2, 6, 1))]},
            {"q": [("insert", (2, 2, 1))]},
            {"q": [("delete", (2, 2, 1))]},
            {"q": [("delete", (2, 6, 1))]},
            {"t": [("insert", (1, 5, 0)), ("insert", (1, 3, 1)), ("insert", (1, 5, 0))]},
            {"q": [("insert", (1, 2, 1))]},  # every trade of key 1 matches it
            {"q": [("insert", (1, 4, 3))]},  # a late quote between them takes over one
            {"q": [("insert", (1, 4, 2)), ("insert", (1, 4, None))]},  # ties at 4: p = 2
            {"q": [("delete", (1, 4, 2))]},  # the tie's winner leaves: p = 3
            {"q": [("update", (1, 2, 1), (1, 6, 1))]},  # a quote moves in time
            {"t": [("update", (1, 3, 1), (1, 6, 1))], "q": [("delete", (1, 4, 3))]},
        ]:
            harness.apply(Epoch.of(ops))
    finally:
        harness.close()


@pytest.mark.parametrize("key_type", ["HUGEINT", "DECIMAL(38,0)"])
def test_keys_duckdb_hashes_alike_stay_apart_in_the_time_index(key_type: str) -> None:
    # DuckDB hashes a 128-bit number as the xor of its halves' hashes: keys 0 and -1 hash
    # alike, and the time index (by key hash) took -1's quotes for 0's.
    _keys_hashed_alike(key_type, ivm.connect)


def test_keys_duckdb_hashes_alike_on_spark(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.mktemp("spark-asof-hugeint")
    _keys_hashed_alike(
        "HUGEINT", lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS)
    )


def _keys_hashed_alike(key_type: str, connect: Any) -> None:
    harness = Harness([f"CREATE TABLE q (k {key_type}, t INTEGER, p INTEGER)",
                       f"CREATE TABLE tr (id INTEGER PRIMARY KEY, k {key_type}, t INTEGER)"],
                      connect=connect)
    try:
        harness.create_views({"v": "SELECT tr.id, tr.k, tr.t, q.p FROM tr "
                                   "ASOF JOIN q ON tr.k = q.k AND tr.t >= q.t"})
        for ops in [
            {"q": [("insert", (0, 1, 10)), ("insert", (-1, 5, 20))],
             "tr": [("insert", (1, 0, 7))]},
            {"tr": [("insert", (2, 0, 8))]},
            {"q": [("insert", (-1, 6, 30))]},
            {"tr": [("insert", (3, 0, 9)), ("insert", (4, -1, 9))],
             "q": [("insert", (0, 2, 11))]},
        ]:
            harness.apply(Epoch.of(ops))
    finally:
        harness.close()


@pytest.mark.parametrize(("sql", "construct"), [
    ("SELECT t.id FROM t ASOF JOIN q ON t.s = q.s AND t.ts >= q.ts AND t.id < q.p",
     "exactly one inequality"),
    ("SELECT t.id FROM t ASOF JOIN q ON t.s = q.s AND t.ts + 1 >= q.ts", "left column"),
    ("SELECT t.id FROM t ASOF RIGHT JOIN q ON t.s = q.s AND t.ts >= q.ts", "RIGHT"),
])
def test_refused(sql: str, construct: str) -> None:
    with ivm.connect() as db:
        db.execute(";".join(TABLES))
        with pytest.raises(ivm.UnsupportedSQL, match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")


def test_an_asof_join_without_inequality_is_an_sql_error() -> None:
    with ivm.connect() as db:
        db.execute(";".join(TABLES))
        with pytest.raises(ivm.SqlError, match="inequality"):
            db.execute("CREATE VIEW v AS SELECT t.id FROM t ASOF JOIN q ON t.s = q.s")


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_asof_join_on_spark(data: st.DataObject, spark: Any,
                            tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-asof")
    views, oracle = _views(["gt_left"])
    run_workload(TABLES, views, data, epochs=2, domains=DOMAINS, oracle=oracle, warmup=1,
                 max_ops=8, modes=("several",),
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS))


TIMED = [
    "CREATE TABLE trades (sym VARCHAR, venue VARCHAR, ts TIMESTAMP, d DATE, "
    "id INTEGER PRIMARY KEY)",
    "CREATE TABLE quotes (sym VARCHAR, venue VARCHAR, ts TIMESTAMP, d DATE, px INTEGER)",
]
TIMED_VIEWS = {  # no two quotes of a key share a time: DuckDB's answer is not left to chance
    "by_ts": "SELECT t.id, q.px, q.ts AS qts FROM trades t ASOF LEFT JOIN quotes q "
             "ON t.sym = q.sym AND t.venue = q.venue AND t.ts >= q.ts",
    "by_day": "SELECT t.id, q.px FROM trades t ASOF JOIN quotes q ON t.sym = q.sym "
              "AND t.venue = q.venue AND t.d < q.d",
}
FAR = 2**63 - 1  # DuckDB's infinity, in microseconds (and, as days, past any date)


def _timed(rows: list[tuple[Any, ...]], names: list[str], weight: int = 1) -> pa.Table:
    columns = list(zip(*rows, strict=True))
    types = {"sym": pa.string(), "venue": pa.string(), "ts": pa.timestamp("us"),
             "d": pa.date32(), "id": pa.int32(), "px": pa.int32()}
    table = pa.table({n: pa.array(c, types[n]) for n, c in zip(names, columns, strict=True)})
    return table.append_column("__w", pa.array([weight] * len(rows), pa.int64()))


def _quotes(rows: list[tuple[Any, ...]], weight: int = 1) -> pa.Table:
    return _timed(rows, ["sym", "venue", "ts", "d", "px"], weight)


def _trades(rows: list[tuple[Any, ...]], weight: int = 1) -> pa.Table:
    return _timed(rows, ["sym", "venue", "ts", "d", "id"], weight)


def test_the_time_index_through_timestamps_infinities_rejections_and_reopening(
    tmp_path: Any,
) -> None:
    """The embedded epoch's time indexes (two key columns, TIMESTAMP and DATE times with
    their infinities), kept right across a rejected batch and rebuilt after reopening:
    every view equals DuckDB's own ASOF JOIN after every step."""
    path = tmp_path / "asof"

    def rows(table: pa.Table) -> list[Any]:  # times as numbers: infinities have no datetime
        plain = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c
                 for c in table.columns]
        return sorted(pa.table(plain, names=table.column_names).to_pylist(), key=repr)

    def check(db: Any) -> None:
        for name, sql in TIMED_VIEWS.items():
            assert rows(db.read(name)) == rows(db.sql(sql)), name

    db = ivm.connect(path)
    try:
        db.execute(";".join(TIMED) + ";" + ";".join(
            f"CREATE VIEW {n} AS {s}" for n, s in TIMED_VIEWS.items()))
        db.ingest({
            "quotes": _quotes([("a", "x", 10, 10, 1), ("a", "x", 20, 20, 2),
                               ("a", "y", 15, 15, 3), ("b", "x", -FAR, -2**31 + 1, 4),
                               ("b", "x", FAR, 2**31 - 1, 5)]),
            "trades": _trades([("a", "x", 12, 12, 1), ("a", "x", 25, 25, 2),
                               ("a", "y", 16, 9, 3), ("b", "x", 0, 0, 4),
                               ("b", "x", FAR, 2**31 - 2, 5), ("a", None, 30, 30, 6)]),
        })
        check(db)
        db.ingest("quotes", _quotes([("a", "x", 11, 11, 6), ("a", "x", 24, 26, 7)]))  # late
        check(db)
        with pytest.raises(ivm.IvmError):  # a quote that is not there: nothing changes
            db.ingest("quotes", _quotes([("a", "x", 13, 13, 9), ("a", "x", 99, 99, 9)], -1))
        check(db)
        db.ingest({"quotes": _quotes([("a", "x", 11, 11, 6)], -1),
                   "trades": _trades([("a", "y", 14, 14, 7)])})
        check(db)
    finally:
        db.close()
    db = ivm.connect(path)  # the indexes are rebuilt from the traces
    try:
        db.ingest({"quotes": _quotes([("a", "y", 15, 15, 3), ("b", "x", FAR, 2**31 - 1, 5)],
                                     -1)})
        db.ingest({"quotes": _quotes([("b", "x", 5, 3, 8)])})
        check(db)
    finally:
        db.close()


def test_an_index_that_does_not_fit_the_change_is_rebuilt() -> None:
    """A time index that a change cannot apply to (a point would go below no rows: it
    does not describe its side) is dropped; that epoch is computed in SQL alone and the
    next one rebuilds the index from the traces."""
    view = "SELECT t.id, q.p FROM t ASOF JOIN q ON t.s = q.s AND t.ts >= q.ts"
    with ivm.connect() as db:
        db.execute(";".join(TABLES) + f"; CREATE VIEW v AS {view}")
        db.ingest({"t": [{"s": 1, "ts": 5, "id": 1}, {"s": 1, "ts": 9, "id": 2}],
                   "q": [{"s": 1, "ts": 1, "p": 10}, {"s": 1, "ts": 7, "p": 20}]})
        db.ingest({"q": [{"s": 1, "ts": 3, "p": 30}]})  # builds the indexes
        (memory,) = [m for m in db._operator_memory.values() if m]
        empty = time_index.TimeIndex.of(*(np.empty(0, t) for t in (np.uint64, np.int64,
                                                                         np.int64)))
        memory["time_indexes"] = asof_indexed.Sides(empty, empty)  # stale on purpose
        db.ingest({"q": [{"s": 1, "ts": 7, "p": 20, "__w": -1}]})
        assert memory == {}
        assert sorted(db.read("v").to_pylist(), key=repr) == sorted(
            db.sql(view).to_pylist(), key=repr)
        db.ingest({"q": [{"s": 1, "ts": 6, "p": 40}]})
        assert "time_indexes" in memory
        assert sorted(db.read("v").to_pylist(), key=repr) == sorted(
            db.sql(view).to_pylist(), key=repr)
