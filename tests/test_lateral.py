"""LATERAL joins: subqueries reading only the row (flat maps) and correlated subqueries
reading tables (a dependent join, decorrelated over the distinct correlation values).

Random CDC epochs against DuckDB's recomputation over both kinds (per-row LIMIT, aggregates
without GROUP BY, GROUP BY, set operations, LEFT JOIN LATERAL … ON, several correlated
columns, NULL correlation values), hand-written edge cases, refusals by name, and Spark.
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

CUSTOMERS = "CREATE TABLE customers (id INTEGER PRIMARY KEY, region VARCHAR, n INTEGER)"
ORDERS = "CREATE TABLE orders (oid INTEGER PRIMARY KEY, cust INTEGER, amount INTEGER)"
NOTES = "CREATE TABLE notes (cust INTEGER, region VARCHAR, note VARCHAR)"

VIEWS = {
    # The two best orders of each customer (ORDER BY … LIMIT per outer row).
    "top_orders": "SELECT c.id, o.oid, o.amount FROM customers c, LATERAL (SELECT oid, "
                  "amount FROM orders WHERE orders.cust = c.id ORDER BY amount DESC, oid "
                  "LIMIT 2) AS o",
    # One row per customer even without orders (an aggregate without GROUP BY).
    "order_totals": "SELECT c.id, t.n, t.total FROM customers c, LATERAL (SELECT count(*) AS n, "
                    "sum(amount) AS total FROM orders o WHERE o.cust = c.id) AS t",
    # LEFT JOIN LATERAL: customers without a big order, padded.
    "big_orders": "SELECT c.id, b.oid FROM customers c LEFT JOIN LATERAL (SELECT o.oid FROM "
                  "orders o WHERE o.cust = c.id AND o.amount > c.n) AS b ON true",
    # Two correlated columns, a non-equality, GROUP BY inside.
    "notes_by_region": "SELECT c.id, s.note, s.k FROM customers c, LATERAL (SELECT x.note, "
                       "count(*) AS k FROM notes x WHERE x.region = c.region AND x.cust <= "
                       "c.id GROUP BY x.note) AS s",
    # A set operation reading tables and the row; a HAVING on a global aggregate.
    "mixed": "SELECT c.id, m.v FROM customers c, LATERAL (SELECT o.amount AS v FROM orders o "
             "WHERE o.cust = c.id UNION SELECT c.n) AS m",
    "busy": "SELECT c.id, b.m FROM customers c, LATERAL (SELECT max(o.amount) + c.n AS m FROM "
            "orders o WHERE o.cust = c.id HAVING count(*) > 1) AS b",
    # Windows (partitioned per outer row) and DISTINCT inside.
    "ranked": "SELECT c.id, r.oid, r.rn FROM customers c, LATERAL (SELECT o.oid, row_number() "
              "OVER (ORDER BY o.amount, o.oid) AS rn FROM orders o WHERE o.cust = c.id) AS r",
    "amounts": "SELECT c.id, a.amount FROM customers c, LATERAL (SELECT DISTINCT o.amount "
               "FROM orders o WHERE o.cust = c.id) AS a",
    # Subqueries reading only the row: flat maps (no state).
    "shifted": "SELECT c.id, s.a, s.b FROM customers c, LATERAL (SELECT c.n + 1 AS a, "
               "upper(c.region) AS b) AS s",
    "fanned": "SELECT c.id, f.x FROM customers c LEFT JOIN LATERAL (SELECT x * 10 AS x FROM "
              "range(c.n) AS r(x) WHERE x > 0) AS f ON true",
    # A derived table reading an earlier FROM item without the keyword, as DuckDB allows.
    "implicit": "SELECT c.id, o.oid FROM customers c, (SELECT oid FROM orders "
                "WHERE orders.cust = c.id AND orders.amount > 2) AS o",
    # A VALUES list reading the row (an unpivot by hand): a flat map.
    "by_hand": "SELECT c.id, v.name, v.value FROM customers c, (VALUES ('id', c.id), "
               "('n', c.n)) AS v(name, value)",
    # Not correlated at all: an ordinary join.
    "crossed": "SELECT c.id, m.top FROM customers c, LATERAL (SELECT max(amount) AS top FROM "
               "orders) AS m",
}


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_lateral_under_random_cdc(data: st.DataObject) -> None:
    run_workload([CUSTOMERS, ORDERS, NOTES], VIEWS, data, epochs=10, modes=(*MODES, "clear"))


def test_correlation_on_null_and_the_outer_rows_multiplicity() -> None:
    harness = Harness([CUSTOMERS, ORDERS, NOTES])
    try:
        harness.apply(Epoch.of({
            "customers": [("insert", (1, "a", 1)), ("insert", (2, None, None)),
                          ("insert", (3, "a", 0))],
            "orders": [("insert", (10, 1, 5)), ("insert", (11, 1, 7)), ("insert", (12, 1, 7)),
                       ("insert", (13, None, 1))],
            "notes": [("insert", (1, "a", "x")), ("insert", (1, "a", "x")),
                      ("insert", (None, None, "y"))],
        }))
        harness.create_views(VIEWS)
        read = harness.db.read
        # Ties on amount broken by oid (the query's order), as DuckDB breaks them.
        assert rows(read("top_orders")) == [(1, 11, 7), (1, 12, 7)]
        assert rows(read("order_totals")) == [(1, 3, 19), (2, 0, None), (3, 0, None)]
        assert rows(read("big_orders")) == [(1, 10), (1, 11), (1, 12), (2, None), (3, None)]
        # A NULL region matches nothing in =, yet its customer gets the subquery's rows.
        assert rows(read("notes_by_region")) == [(1, "x", 2), (3, "x", 2)]
        assert rows(read("mixed")) == [(1, 1), (1, 5), (1, 7), (2, None), (3, 0)]
        harness.apply(Epoch.of({"orders": [("delete", (11, 1, 7)), ("insert", (14, 3, 2))],
                                "customers": [("update", (2, None, None), (2, "a", 5))]}))
        assert rows(read("top_orders")) == [(1, 10, 5), (1, 12, 7), (3, 14, 2)]
        harness.apply(Epoch.of({"orders": [("delete", (10, 1, 5)), ("delete", (12, 1, 7))]}))
        assert rows(read("order_totals")) == [(1, 0, None), (2, 0, None), (3, 1, 2)]
    finally:
        harness.close()


def test_a_lateral_reading_only_the_row_is_a_flat_map() -> None:
    with ivm.connect() as db:
        db.execute(f"{CUSTOMERS}; CREATE VIEW shifted AS {VIEWS['shifted']}")
        assert "FlatMap" in db.explain("shifted")
        assert "Join" not in db.explain("shifted")


@pytest.mark.parametrize(("sql", "construct"), [
    ("SELECT * FROM customers c, LATERAL (SELECT * FROM (SELECT * FROM orders o "
     "WHERE o.cust = c.id) x) s", "correlated reference"),
    ("SELECT * FROM customers c, LATERAL (SELECT o.oid FROM orders o RIGHT JOIN notes n "
     "ON n.cust = o.cust WHERE o.cust = c.id) s", "RIGHT JOIN"),
    ("SELECT * FROM customers c FULL JOIN LATERAL (SELECT o.oid FROM orders o "
     "WHERE o.cust = c.id) s ON true", "FULL JOIN of a lateral item"),
    ("SELECT * FROM customers c, LATERAL (SELECT o.oid FROM orders o WHERE o.cust = c.id "
     "LIMIT 1) s", "LIMIT / OFFSET without ORDER BY"),
])
def test_what_is_refused_is_named(sql: str, construct: str) -> None:
    with ivm.connect() as db:
        db.execute(f"{CUSTOMERS}; {ORDERS}; {NOTES}")
        with pytest.raises(ivm.UnsupportedSQL, match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")


SPARK = ["order_totals", "fanned"]


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_lateral_on_spark(data: st.DataObject, spark: Any,
                          tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-lateral")
    run_workload([CUSTOMERS, ORDERS], {n: VIEWS[n] for n in SPARK}, data, epochs=3,
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
