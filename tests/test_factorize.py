"""Factorized aggregates over joins (``ivm.passes.factorize``) under random CDC and by hand.

Chains and stars of three and four tables, with SUMs of products of one-table terms,
COUNT(*), COUNT(column), constants, filters of one table and of the join, NULL join
keys and NULL measures, duplicate rows, updates and deletes, are checked against
DuckDB after every epoch (tests/oracle/harness.py) with the pass forced on, and the
same views with it off give the same contents. Spark mode runs the same plans.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

A = "CREATE TABLE a (i INTEGER, j INTEGER, v BIGINT)"
B = "CREATE TABLE b (j INTEGER, l INTEGER, v DECIMAL(6, 2))"
C = "CREATE TABLE c (l INTEGER, k INTEGER, v INTEGER)"
D = "CREATE TABLE d (k INTEGER, m INTEGER, w INTEGER)"
KEYS = (1, 2, 3, None)
DOMAINS = {"a.i": (1, 2), "a.j": KEYS, "a.v": (1, -2, 5, None),
           "b.j": KEYS, "b.l": KEYS, "b.v": (Decimal("0.5"), Decimal(2), Decimal("-1.25"), None),
           "c.l": KEYS, "c.k": (1, 2), "c.v": (3, -1, None),
           "d.k": (1, 2, None), "d.m": (1, 2), "d.w": (2, 7, None)}

CHAINS = {
    "matrix_product": "SELECT a.i, b.l, SUM(a.v * b.v) AS s FROM a JOIN b ON a.j = b.j "
                      "GROUP BY a.i, b.l",
    "chain3": "SELECT a.i, c.k, SUM(a.v * b.v * c.v) AS s, COUNT(*) AS n FROM a "
              "JOIN b ON a.j = b.j JOIN c ON b.l = c.l GROUP BY a.i, c.k",
    "chain4": "SELECT a.i, d.m, SUM(a.v * b.v * c.v * d.w) AS s, COUNT(*) AS n, "
              "COUNT(c.v) AS cv, SUM(b.v) AS sb FROM a, b, c, d "
              "WHERE a.j = b.j AND b.l = c.l AND c.k = d.k GROUP BY a.i, d.m",
    "filtered": "SELECT c.k, SUM(2 * a.v * (c.v + 1)) AS s, COUNT(*) AS n FROM a "
                "JOIN b ON a.j = b.j JOIN c ON b.l = c.l "
                "WHERE a.v > 0 AND b.v IS NOT NULL AND c.l <> 2 GROUP BY c.k",
    "one_table_sums": "SELECT a.i, SUM(a.v) AS sa, SUM(c.v) AS sc FROM a JOIN b ON a.j = b.j "
                      "JOIN c ON b.l = c.l GROUP BY a.i",
    "path_counts": "SELECT a.i, COUNT(*) AS paths FROM a JOIN b ON a.j = b.j "
                   "JOIN c ON b.l = c.l JOIN d ON c.k = d.k GROUP BY a.i",
}
STAR = {
    "star": "SELECT a.i, c.k, SUM(b.v) AS revenue, COUNT(*) AS n FROM b "
            "JOIN a ON a.j = b.j JOIN c ON c.l = b.l GROUP BY a.i, c.k",
}


def _factorized() -> Any:
    db = ivm.connect()
    db.aggregate_plan = "factorized"
    return db


@pytest.mark.parametrize("views", [CHAINS, STAR], ids=["chains", "star"])
@RANDOM_CDC
@given(data=st.data())
def test_factorized_views_random_cdc(views: dict[str, str], data: st.DataObject) -> None:
    # All 12 epochs even in `make test`: the first few seldom join all four tables.
    run_workload([A, B, C, D], views, data, epochs=12, max_ops=8, domains=DOMAINS,
                 connect=_factorized, shorten=False)


def _rows(db: Any, view: str) -> list[str]:
    return sorted(map(repr, db.read(view).to_pylist()))


def test_the_pass_on_and_off_give_the_same_views() -> None:
    harness = Harness([A, B, C, D], DOMAINS, connect=_factorized)
    flat = ivm.connect()
    flat.aggregate_plan = "flat"
    try:
        flat.execute(f"{A}; {B}; {C}; {D}")
        harness.create_views(CHAINS)
        for name, sql in CHAINS.items():
            flat.execute(f"CREATE VIEW {name} AS {sql}")
            assert harness.db.explain(name).count("Aggregate") >= 2, name
            assert flat.explain(name).count("Aggregate") == 1, name
        rows = {"a": [(i, j, v) for i in (1, 2) for j in (1, 2, None) for v in (1, None)],
                "b": [(j, j % 3 + 1, Decimal("0.5")) for j in (1, 2, 3)]
                + [(1, None, Decimal(2)), (2, 3, None)],
                "c": [(n, 1 + n % 2, n) for n in (1, 2, 3)] + [(3, 2, None)],
                "d": [(1, 1, 2), (2, 2, 7), (1, 2, None)]}
        batches = {t: [dict(zip(_columns(t), r, strict=True)) for r in v] for t, v in rows.items()}
        for db in (harness.db, flat):
            db.ingest(batches)
            db.ingest({"a": [{"i": 1, "j": 1, "v": 1, "__w": -1}],
                       "c": [{"l": 3, "k": 2, "v": None, "__w": -1},
                             {"l": 3, "k": 2, "v": 5, "__w": 2}]})
        for name in CHAINS:
            assert _rows(harness.db, name) == _rows(flat, name), name
            assert harness.db.read(name).num_rows > 0, name
    finally:
        harness.close()
        flat.close()


def _columns(table: str) -> tuple[str, ...]:
    return {"a": ("i", "j", "v"), "b": ("j", "l", "v"), "c": ("l", "k", "v"),
            "d": ("k", "m", "w")}[table]


def test_where_it_applies() -> None:
    with ivm.connect() as db:
        db.execute(f"{A}; {B}; {C}; CREATE TABLE dim (j INTEGER PRIMARY KEY, g INTEGER); "
                   "CREATE TABLE f (j INTEGER, x DOUBLE, y INTEGER)")
        assert db.aggregate_plan == "flat"
        assert "__f" not in db.check(CHAINS["chain3"]).plan  # the default
        db.aggregate_plan = "auto"
        views = {
            "fans_out": CHAINS["chain3"],  # no keys: auto factorizes
            "key_join": "SELECT dim.g, SUM(f.y) AS s FROM f JOIN dim ON f.j = dim.j GROUP BY 1",
            "float_sum": "SELECT a.i, SUM(f.x) AS s FROM a JOIN f ON a.j = f.j GROUP BY 1",
            "minimum": "SELECT a.i, MIN(b.v) AS m FROM a JOIN b ON a.j = b.j GROUP BY 1",
            "cyclic": "SELECT a.i, COUNT(*) AS n FROM a JOIN b ON a.j = b.j "
                      "JOIN c ON b.l = c.l AND c.k = a.i GROUP BY 1",
            "hinted_flat": CHAINS["chain3"].replace("SELECT", "SELECT /*+ no_factorize */"),
            "hinted_key_join": "SELECT /*+ factorize */ dim.g, SUM(f.y) AS s FROM f "
                               "JOIN dim ON f.j = dim.j GROUP BY 1",
        }
        for name, sql in views.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        factorized = {name: "__f" in db.explain(name) for name in views}
        assert factorized == {"fans_out": True, "key_join": False, "float_sum": False,
                              "minimum": False, "cyclic": False, "hinted_flat": False,
                              "hinted_key_join": True}
        with pytest.raises(ivm.IvmError, match="aggregate_plan must be one of"):
            db.aggregate_plan = "tree"


def test_a_fan_out_chain_is_summed_by_its_factors() -> None:
    # Each of 30 a-rows meets 30 b-rows meets 30 c-rows per key: the flat join holds
    # 27,000 rows per key, the factors one row per (key, group).
    with _factorized() as db:
        db.execute(f"{A}; {B}; {C}; CREATE VIEW v AS {CHAINS['chain3']}")
        db.ingest({"a": [{"i": n % 2, "j": 1, "v": n} for n in range(30)],
                   "b": [{"j": 1, "l": 1, "v": n} for n in range(30)],
                   "c": [{"l": 1, "k": n % 2, "v": 1} for n in range(30)]})
        assert sorted(db.read("v").to_pylist(), key=lambda r: (r["i"], r["k"]))[0] == {
            "i": 0, "k": 0, "s": sum(range(0, 30, 2)) * sum(range(30)) * 15, "n": 15 * 30 * 15}
        db.ingest("b", [{"j": 1, "l": 1, "v": 0, "__w": -1}])  # one row out: n falls by 225
        assert "__f" in db.explain("v")
        assert {r["n"] for r in db.read("v").to_pylist()} == {15 * 29 * 15}


# --- Spark mode: the same plans, partitioned -------------------------------------------------

@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_factorized_views_on_spark(data: st.DataObject, spark: Any,
                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-factorized")

    def connect() -> Any:
        db = ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS)
        db.aggregate_plan = "factorized"
        return db

    views = {"chain3": CHAINS["chain3"], "filtered": CHAINS["filtered"]}
    run_workload([A, B, C, D], views, data, epochs=3, max_ops=6, domains=DOMAINS,
                 connect=connect)
