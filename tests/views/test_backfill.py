"""CREATE VIEW over tables that already hold data: the view starts from their contents."""

from __future__ import annotations

import pytest
from oracle.rows import rows

import ivm


@pytest.fixture
def db():
    session = ivm.connect()
    session.execute("""
        CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
        CREATE TABLE customers (name VARCHAR PRIMARY KEY, city VARCHAR);
        CREATE TABLE empty (id BIGINT, v BIGINT);
    """)
    session.ingest(
        {
            "orders": [
                {"id": 1, "customer": "ann", "amount": 10},
                {"id": 2, "customer": "ann", "amount": 5},
                {"id": 3, "customer": "bob", "amount": 7},
                {"id": 4, "customer": "zed", "amount": 1},
            ],
            "customers": [
                {"name": "ann", "city": "oslo"},
                {"name": "bob", "city": "oslo"},
                {"name": "cy", "city": "rome"},
            ],
        }
    )
    session.ingest("orders", [{"id": 2, "customer": "ann", "amount": 5, "__w": -1}])
    yield session
    session.close()


def test_backfill_aggregate(db):
    db.execute("CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total, COUNT(*) AS n, "
               "MIN(amount) AS lo FROM orders GROUP BY customer")
    assert db.epoch == 2  # DDL does not advance the epoch
    assert rows(db.read("revenue")) == [("ann", 10, 1, 10), ("bob", 7, 1, 7), ("zed", 1, 1, 1)]
    delta = db.ingest("orders", [{"id": 5, "customer": "ann", "amount": 2}])
    assert rows(delta["revenue"]) == [("ann", 10, 1, 10, -1), ("ann", 12, 2, 2, 1)]
    assert rows(db.read("revenue")) == [("ann", 12, 2, 2), ("bob", 7, 1, 7), ("zed", 1, 1, 1)]


def test_backfill_join(db):
    db.execute("CREATE VIEW oc AS SELECT o.id, c.city FROM orders o JOIN customers c "
               "ON o.customer = c.name")
    assert rows(db.read("oc")) == [(1, "oslo"), (3, "oslo")]
    delta = db.ingest("customers", [{"name": "zed", "city": "rome"}])
    assert rows(delta["oc"]) == [(4, "rome", 1)]
    delta = db.ingest("orders", [{"id": 6, "customer": "cy", "amount": 3}])
    assert rows(delta["oc"]) == [(6, "rome", 1)]
    assert rows(db.read("oc")) == [(1, "oslo"), (3, "oslo"), (4, "rome"), (6, "rome")]


def test_backfill_join_aggregate(db):
    db.execute("CREATE VIEW by_city AS SELECT c.city, SUM(o.amount) AS total FROM orders o "
               "JOIN customers c ON o.customer = c.name GROUP BY c.city")
    assert rows(db.read("by_city")) == [("oslo", 17)]
    delta = db.ingest("customers", [{"name": "bob", "city": "oslo", "__w": -1},
                                    {"name": "bob", "city": "rome", "__w": 1}])
    assert rows(delta["by_city"]) == [("oslo", 10, 1), ("oslo", 17, -1), ("rome", 7, 1)]


def test_backfill_distinct(db):
    db.execute("CREATE VIEW cities AS SELECT DISTINCT city FROM customers")
    assert rows(db.read("cities")) == [("oslo",), ("rome",)]
    delta = db.ingest("customers", [{"name": "dan", "city": "oslo"}])
    assert delta["cities"].num_rows == 0
    delta = db.ingest("customers", [{"name": "cy", "city": "rome", "__w": -1}])
    assert rows(delta["cities"]) == [("rome", -1)]
    assert rows(db.read("cities")) == [("oslo",)]


def test_backfill_filter_and_project(db):
    db.execute("CREATE VIEW big AS SELECT id, amount * 2 AS double FROM orders WHERE amount > 5")
    assert rows(db.read("big")) == [(1, 20), (3, 14)]


def test_global_aggregate_over_empty_table(db):
    db.execute("CREATE VIEW g AS SELECT COUNT(*) AS n, SUM(v) AS s, COUNT(v) AS c, "
               "MAX(v) AS m FROM empty")
    assert rows(db.read("g")) == [(0, None, 0, None)]
    delta = db.ingest("empty", [{"id": 1, "v": 4}, {"id": 2, "v": None}])
    assert rows(delta["g"]) == [(0, None, 0, None, -1), (2, 4, 1, 4, 1)]
    delta = db.ingest("empty", [{"id": 1, "v": 4, "__w": -1}, {"id": 2, "v": None, "__w": -1}])
    assert rows(delta["g"]) == [(0, None, 0, None, 1), (2, 4, 1, 4, -1)]
    assert rows(db.read("g")) == [(0, None, 0, None)]


def test_global_aggregate_over_table_with_data(db):
    db.execute("CREATE VIEW g AS SELECT COUNT(*) AS n, SUM(amount) AS s FROM orders")
    assert rows(db.read("g")) == [(3, 18)]


def test_global_aggregate_over_emptied_table(db):
    db.ingest("orders", [{"id": i, "customer": c, "amount": a, "__w": -1}
                         for i, c, a in [(1, "ann", 10), (3, "bob", 7), (4, "zed", 1)]])
    db.execute("CREATE VIEW g AS SELECT COUNT(*) AS n, SUM(amount) AS s FROM orders")
    assert rows(db.read("g")) == [(0, None)]
    db.execute("CREATE VIEW k AS SELECT customer, COUNT(*) AS n FROM orders GROUP BY customer")
    assert rows(db.read("k")) == []


def test_backfill_matches_view_created_before_data():
    early, late = ivm.connect(), ivm.connect()
    ddl = "CREATE TABLE t (k VARCHAR, v BIGINT)"
    view = ("CREATE VIEW s AS SELECT k, SUM(v) AS s, COUNT(*) AS n, MAX(v) AS m "
            "FROM t GROUP BY k HAVING COUNT(*) > 1")
    early.execute(ddl + ";" + view)
    late.execute(ddl)
    batches = [
        [{"k": "a", "v": 1, "__w": 3}, {"k": "b", "v": 2, "__w": 1}],
        [{"k": "a", "v": 1, "__w": -2}, {"k": "b", "v": 5, "__w": 2}],
    ]
    for batch in batches:
        early.ingest("t", batch)
        late.ingest("t", batch)
    late.execute(view)
    assert rows(late.read("s")) == rows(early.read("s")) == [("b", 12, 3, 5)]
    final = [{"k": "a", "v": 9, "__w": 1}]
    assert rows(late.ingest("t", final)["s"]) == rows(early.ingest("t", final)["s"])
    assert rows(late.read("s")) == [("a", 10, 2, 9), ("b", 12, 3, 5)]


def test_backfill_sum_of_large_duplicates(db):
    db.execute("CREATE TABLE big (a BIGINT)")
    db.ingest("big", [{"a": 2**62, "__w": 2}])
    db.execute("CREATE VIEW s AS SELECT SUM(a) AS s, COUNT(*) AS n FROM big")
    assert rows(db.read("s")) == [(2**63, 2)]

