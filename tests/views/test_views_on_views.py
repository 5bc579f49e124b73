"""Views over views: changes flow through both; DROP respects dependencies."""

from __future__ import annotations

import pytest
from oracle.rows import rows

import ivm


@pytest.fixture
def db():
    session = ivm.connect()
    session.execute("""
        CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
        CREATE VIEW revenue AS
            SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
        CREATE VIEW big_customers AS SELECT customer FROM revenue WHERE total >= 10;
        CREATE VIEW n_big AS SELECT COUNT(*) AS n FROM big_customers;
    """)
    yield session
    session.close()


def test_change_flows_through_every_level(db):
    delta = db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 6},
                                 {"id": 2, "customer": "bob", "amount": 12}])
    assert rows(delta["revenue"]) == [("ann", 6, 1), ("bob", 12, 1)]
    assert rows(delta["big_customers"]) == [("bob", 1)]
    assert rows(delta["n_big"]) == [(0, -1), (1, 1)]

    delta = db.ingest("orders", [{"id": 3, "customer": "ann", "amount": 4}])
    assert rows(delta["revenue"]) == [("ann", 6, -1), ("ann", 10, 1)]
    assert rows(delta["big_customers"]) == [("ann", 1)]
    assert rows(delta["n_big"]) == [(1, -1), (2, 1)]

    delta = db.ingest("orders", [{"id": 2, "customer": "bob", "amount": 12, "__w": -1}])
    assert rows(delta["revenue"]) == [("bob", 12, -1)]
    assert rows(delta["big_customers"]) == [("bob", -1)]
    assert rows(delta["n_big"]) == [(1, 1), (2, -1)]

    assert rows(db.read("revenue")) == [("ann", 10)]
    assert rows(db.read("big_customers")) == [("ann",)]
    assert rows(db.read("n_big")) == [(1,)]


def test_change_that_does_not_reach_upper_view(db):
    db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 1}])
    delta = db.ingest("orders", [{"id": 2, "customer": "ann", "amount": 2}])
    assert rows(delta["revenue"]) == [("ann", 1, -1), ("ann", 3, 1)]
    assert delta["big_customers"].num_rows == 0
    assert delta["n_big"].num_rows == 0


def test_view_joining_a_view_and_a_table(db):
    db.execute("CREATE VIEW share AS SELECT o.id, o.amount, r.total FROM orders o "
               "JOIN revenue r ON o.customer = r.customer")
    db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 6}])
    delta = db.ingest("orders", [{"id": 2, "customer": "ann", "amount": 4}])
    # both sides change in the same epoch: old (1, 6, 6) goes, (1, 6, 10) and (2, 4, 10) come
    assert rows(delta["share"]) == [(1, 6, 6, -1), (1, 6, 10, 1), (2, 4, 10, 1)]
    assert rows(db.read("share")) == [(1, 6, 10), (2, 4, 10)]


def test_view_created_over_populated_view(db):
    db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 20},
                         {"id": 2, "customer": "bob", "amount": 2}])
    db.execute("CREATE VIEW small AS SELECT customer FROM revenue WHERE total < 10")
    assert rows(db.read("small")) == [("bob",)]
    delta = db.ingest("orders", [{"id": 3, "customer": "cy", "amount": 1}])
    assert rows(delta["small"]) == [("cy", 1)]


def test_drop_lower_view_while_upper_exists_raises(db):
    db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 20}])
    with pytest.raises(ivm.IvmError):
        db.execute("DROP VIEW revenue")
    with pytest.raises(ivm.IvmError):
        db.execute("DROP VIEW big_customers")
    # nothing was dropped
    assert rows(db.read("revenue")) == [("ann", 20)]
    assert rows(db.read("n_big")) == [(1,)]
    delta = db.ingest("orders", [{"id": 2, "customer": "bob", "amount": 30}])
    assert rows(delta["n_big"]) == [(1, -1), (2, 1)]


def test_drop_table_with_views_raises(db):
    with pytest.raises(ivm.IvmError):
        db.execute("DROP TABLE orders")
    db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 20}])
    assert rows(db.read("big_customers")) == [("ann",)]


def test_drop_in_dependency_order(db):
    db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 20}])
    db.execute("DROP VIEW n_big")
    db.execute("DROP VIEW big_customers")
    delta = db.ingest("orders", [{"id": 2, "customer": "bob", "amount": 1}])
    assert set(delta) == {"revenue"}
    db.execute("DROP VIEW revenue")
    db.execute("DROP TABLE orders")
    for name in ("orders", "revenue", "big_customers", "n_big"):
        with pytest.raises(ivm.SqlError):
            db.read(name)
    # names can be reused, and the new objects start empty
    db.execute("""
        CREATE TABLE orders (id BIGINT, amount BIGINT);
        CREATE VIEW revenue AS SELECT SUM(amount) AS total FROM orders;
    """)
    assert rows(db.read("revenue")) == [(None,)]
    delta = db.ingest("orders", [{"id": 1, "amount": 3}])
    assert rows(delta["revenue"]) == [(None, -1), (3, 1)]


def test_drop_in_one_script(db):
    db.execute("DROP VIEW n_big; DROP VIEW big_customers; DROP VIEW revenue; DROP TABLE orders")
    with pytest.raises(ivm.SqlError):
        db.read("orders")


def test_drop_if_exists(db):
    db.execute("DROP VIEW IF EXISTS nope; DROP TABLE IF EXISTS nope")
    with pytest.raises(ivm.SqlError):
        db.execute("DROP VIEW nope")
    with pytest.raises(ivm.SqlError):
        db.execute("DROP TABLE nope")


def test_drop_view_of_a_table_name_raises(db):
    with pytest.raises(ivm.SqlError):
        db.execute("DROP TABLE revenue")
    with pytest.raises(ivm.SqlError):
        db.execute("DROP VIEW orders")


def test_drop_removes_all_state(db):
    db.execute("CREATE VIEW cities AS SELECT DISTINCT customer FROM orders")
    db.ingest("orders", [{"id": 1, "customer": "ann", "amount": 20}])

    def tables() -> set[str]:
        found = db.sql("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").to_pylist()
        return {r["table_name"] for r in found}

    with_views = tables()
    db.execute("DROP VIEW n_big; DROP VIEW big_customers; DROP VIEW revenue; DROP VIEW cities")
    without_views = tables()
    assert without_views < with_views
    assert not any("revenue" in t or "big" in t or "cities" in t for t in without_views)
    db.execute("DROP TABLE orders")
    assert not any("orders" in t for t in tables())
