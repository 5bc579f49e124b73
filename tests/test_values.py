"""VALUES lists (constant relations) in FROM, joins, CTEs, subqueries and set operations.

A VALUES list's change is its whole contents once, when a view's state starts (over
existing rows or empty tables), and nothing afterwards; its integral is its contents.
Random CDC epochs against DuckDB's recomputation (``run_workload``), hand-written cases
(a view that is only a VALUES list, creation over existing rows, reopened state), and the
same views in Spark mode with 3 partitions.
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

ORDERS = "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, qty INTEGER)"
EVENTS = "CREATE TABLE events (k INTEGER, v DOUBLE, tag VARCHAR)"

VIEWS = {
    # a join with a constant holding a duplicate row and a NULL key
    "ranked": "SELECT o.id, o.customer, r.rank FROM orders o "
              "JOIN (VALUES ('a', 1), ('b', 2), ('b', 2), (NULL, 3)) AS r(name, rank) "
              "ON o.customer = r.name",
    # UNION ALL of a table and a constant (duplicates and NULLs)
    "labels": "SELECT customer AS label, qty FROM orders UNION ALL "
              "SELECT * FROM (VALUES ('fixed', 1), ('fixed', 1), (NULL, NULL)) AS t(label, qty)",
    # only a constant: never changes
    "fixed_rows": "SELECT t.k, t.v FROM (VALUES (1, 'a'), (2, NULL), (2, NULL)) AS t(k, v)",
    # a CTE of VALUES joined and aggregated
    "weighted": "WITH c(tag, weight) AS (VALUES ('a', 10), ('c', NULL), ('c', 5)) "
                "SELECT c.tag, COUNT(e.k) AS n, SUM(c.weight) AS w "
                "FROM c JOIN events e ON e.tag = c.tag GROUP BY c.tag",
    # an aggregate over a table UNION ALL a VALUES query
    "per_label": "SELECT x, COUNT(*) AS n FROM "
                 "(SELECT customer AS x FROM orders UNION ALL VALUES ('a'), ('zz')) AS u "
                 "GROUP BY x",
    # the constant on the preserved side of an outer join
    "unmatched": "SELECT r.name, o.id FROM (VALUES ('a'), ('c'), ('q')) AS r(name) "
                 "LEFT JOIN orders o ON o.customer = r.name",
    # a subquery over VALUES (a semi join), and numeric keys of two types
    "chosen": "SELECT id, qty FROM orders WHERE customer IN "
              "(SELECT c FROM (VALUES ('a'), ('b')) AS t(c))",
    "scaled": "SELECT e.k, e.v * m.factor AS scaled FROM events e "
              "JOIN (VALUES (1, 2.5), (2, 0.5), (2, 0.5)) AS m(k, factor) ON e.k = m.k",
    # a view over a view that reads a constant
    "rank_counts": "SELECT rank, COUNT(*) AS n FROM ranked GROUP BY rank",
}

SPARK = ["ranked", "labels", "fixed_rows"]


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_values_under_random_cdc(data: st.DataObject) -> None:
    run_workload([ORDERS, EVENTS], VIEWS, data, epochs=10, modes=(*MODES, "clear"))


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_values_survive_reopening(data: st.DataObject,
                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    # The deltas after each reopen add up to the contents: a constant emitted again
    # (or lost) on reopening fails the harness's delta check.
    directory = tmp_path_factory.mktemp("values-reopen")
    run_workload([ORDERS, EVENTS], {n: VIEWS[n] for n in ("ranked", "labels", "fixed_rows")},
                 data, epochs=6, reopen_every=2, connect=lambda: ivm.connect(directory))


def test_a_view_of_only_values_never_changes() -> None:
    with ivm.connect() as db:
        db.execute(f"{ORDERS}; CREATE VIEW fixed_rows AS {VIEWS['fixed_rows']}; "
                   "CREATE VIEW bare AS VALUES (1), (2), (2)")
        assert sorted(db.read("fixed_rows").to_pylist(), key=str) == [
            {"k": 1, "v": "a"}, {"k": 2, "v": None}, {"k": 2, "v": None}]
        assert db.read("bare").column_names == ["col0"]
        assert sorted(db.read("bare").column("col0").to_pylist()) == [1, 2, 2]
        assert not db.views["fixed_rows"].sources
        for batch in ([{"id": 1, "customer": "a", "qty": 1}], [{"id": 1, "__w": -1,
                       "customer": "a", "qty": 1}]):
            deltas = db.ingest("orders", batch)
            assert deltas["fixed_rows"].num_rows == 0 and deltas["bare"].num_rows == 0
        assert db.read("fixed_rows").num_rows == 3
        assert "Constant Values 3 rows (k, v)" in db.explain("fixed_rows")


def test_creation_over_existing_rows_and_over_empty_tables() -> None:
    harness = Harness([ORDERS])
    try:
        harness.create_views({"labels": VIEWS["labels"]})  # empty table: the constant alone
        assert harness.db.read("labels").num_rows == 3
        harness.apply(Epoch.of({"orders": [("insert", (1, "a", 2)), ("insert", (2, "b", 1)),
                                           ("insert", (3, None, None))]}))
        harness.create_views({"ranked": VIEWS["ranked"], "rank_counts": VIEWS["rank_counts"]})
        assert harness.db.read("ranked").num_rows == 3  # 'a' once, 'b' twice
        harness.apply(Epoch.of({"orders": [("delete", (2, "b", 1)),
                                           ("update", (1, "a", 2), (1, "b", 5))]}))
        harness.apply(Epoch.of({"orders": [("delete", (1, "b", 5)), ("delete", (3, None, None))]}))
        assert harness.db.read("ranked").num_rows == 0
        assert harness.db.read("labels").num_rows == 3
    finally:
        harness.close()


def test_reopened_state_does_not_emit_the_constant_again(tmp_path: Any) -> None:
    with ivm.connect(tmp_path) as db:
        db.execute(f"{ORDERS}; CREATE VIEW labels AS {VIEWS['labels']}; "
                   f"CREATE VIEW ranked AS {VIEWS['ranked']}")
    with ivm.connect(tmp_path) as db:
        deltas = db.ingest("orders", [{"id": 1, "customer": "b", "qty": 4}])
        assert sorted(deltas["labels"].to_pylist(), key=str) == [
            {"label": "b", "qty": 4, "__w": 1}]
        assert deltas["ranked"].to_pylist() == [
            {"id": 1, "customer": "b", "rank": 2, "__w": 2}]
        assert db.read("labels").num_rows == 4


@pytest.mark.parametrize(("sql", "construct"), [
    # (Joined after the items it reads, a VALUES list reading them is a flat map:
    # tests/test_lateral.py.)
    ("SELECT o.id, t.x FROM (VALUES (o.id)) AS t(x), orders o", "column reference in VALUES"),
    ("SELECT * FROM (VALUES ((SELECT MAX(id) FROM orders))) AS t(x)", "subquery in VALUES"),
])
def test_a_values_list_that_is_not_constant_is_refused(sql: str, construct: str) -> None:
    with ivm.connect() as db:
        db.execute(ORDERS)
        with pytest.raises(ivm.UnsupportedSQL, match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_values_on_spark(data: st.DataObject, spark: Any,
                         tmp_path_factory: pytest.TempPathFactory) -> None:
    # Each constant row reaches exactly one of the 3 partitions (a copy per partition
    # would double the join and the union); a reopen must not emit it again.
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-values")
    run_workload([ORDERS], {n: VIEWS[n] for n in SPARK}, data, epochs=3, reopen_every=2,
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
