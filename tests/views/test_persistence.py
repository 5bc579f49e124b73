"""Persistent sessions: state survives close and reopen, and maintenance continues correctly.

Every check compares the reopened session against a fresh in-memory session fed the same
DDL and batches.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from oracle.rows import rows

import ivm

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DECIMAL(12,2));
    CREATE TABLE customers (name VARCHAR PRIMARY KEY, city VARCHAR NOT NULL);
    CREATE VIEW revenue AS
        SELECT customer, SUM(amount) AS total, COUNT(*) AS n, MAX(amount) AS top
        FROM orders GROUP BY customer;
    CREATE VIEW by_city AS
        SELECT c.city, SUM(o.amount) AS total, COUNT(*) AS n
        FROM orders o JOIN customers c ON o.customer = c.name GROUP BY c.city;
    CREATE VIEW cities AS SELECT DISTINCT city FROM customers;
    CREATE VIEW rich_cities AS SELECT city FROM by_city WHERE total > 20;
"""
VIEWS = ("revenue", "by_city", "cities", "rich_cities")
NAMES = ("orders", "customers", *VIEWS)

BATCHES = [
    {
        "customers": [{"name": "ann", "city": "oslo"}, {"name": "bob", "city": "rome"}],
        "orders": [
            {"id": 1, "customer": "ann", "amount": 10},
            {"id": 2, "customer": "bob", "amount": 15},
        ],
    },
    {"orders": [{"id": 3, "customer": "ann", "amount": 12}]},
    {
        "orders": [
            {"id": 2, "customer": "bob", "amount": 15, "__w": -1},
            {"id": 4, "customer": "cy", "amount": 4, "__w": 1},
        ],
        "customers": [{"name": "cy", "city": "oslo"}],
    },
]
LATER = [
    {"customers": [{"op": "u", "before": {"name": "cy", "city": "oslo"},
                    "after": {"name": "cy", "city": "rome"}}]},
    {"orders": [{"id": 1, "customer": "ann", "amount": 10, "_change_type": "update_preimage"},
                {"id": 1, "customer": "ann", "amount": 30, "_change_type": "update_postimage"}]},
    {"orders": [{"id": 5, "customer": "bob", "amount": 50}]},
]




def contents(db) -> dict[str, list[tuple]]:
    return {name: rows(db.read(name)) for name in NAMES}


def deltas(result: dict[str, pa.Table]) -> dict[str, list[tuple]]:
    return {name: rows(t) for name, t in result.items()}


@pytest.fixture
def reference():
    db = ivm.connect()
    db.execute(DDL)
    for batch in BATCHES:
        db.ingest(batch)
    yield db
    db.close()


def build(state) -> None:
    db = ivm.connect(state)
    db.execute(DDL)
    for batch in BATCHES:
        db.ingest(batch)
    db.close()


def test_reopen_gives_same_contents_and_epoch(tmp_path, reference):
    state = tmp_path / "state"
    build(state)
    assert (state / "ivm.duckdb").exists()
    with ivm.connect(state) as db:
        assert db.epoch == 3
        assert contents(db) == contents(reference)
        assert db.read("revenue").schema == reference.read("revenue").schema
        assert db.explain("by_city") == reference.explain("by_city")


def test_reopen_and_keep_ingesting(tmp_path, reference):
    state = tmp_path / "state"
    build(state)
    db = ivm.connect(state)
    for batch in LATER:
        assert deltas(db.ingest(batch)) == deltas(reference.ingest(batch))
        assert contents(db) == contents(reference)
    assert db.epoch == reference.epoch == 6
    db.close()
    # and once more across a restart
    with ivm.connect(state) as db:
        assert db.epoch == 6
        assert contents(db) == contents(reference)


def test_hand_computed_contents_after_reopen(tmp_path):
    state = tmp_path / "state"
    build(state)
    with ivm.connect(state) as db:
        db.ingest(LATER[0])
        # orders: 1 ann 10, 3 ann 12, 4 cy 4; customers: ann oslo, bob rome, cy rome
        assert rows(db.read("revenue")) == [("ann", 22, 2, 12), ("cy", 4, 1, 4)]
        assert rows(db.read("by_city")) == [("oslo", 22, 2), ("rome", 4, 1)]
        assert rows(db.read("cities")) == [("oslo",), ("rome",)]
        assert rows(db.read("rich_cities")) == [("oslo",)]


def test_reopen_after_each_epoch(tmp_path, reference):
    state = tmp_path / "state"
    with ivm.connect(state) as db:
        db.execute(DDL)
    fresh = ivm.connect()
    fresh.execute(DDL)
    for batch in BATCHES + LATER:
        with ivm.connect(state) as db:
            assert deltas(db.ingest(batch)) == deltas(fresh.ingest(batch))
    with ivm.connect(state) as db:
        assert contents(db) == contents(fresh)
        assert db.epoch == 6


def test_ddl_after_reopen(tmp_path, reference):
    state = tmp_path / "state"
    build(state)
    with ivm.connect(state) as db:
        db.execute("DROP VIEW rich_cities")
        db.execute("CREATE VIEW per_customer AS SELECT customer, COUNT(*) AS n FROM orders "
                   "GROUP BY customer")
        assert rows(db.read("per_customer")) == [("ann", 2), ("cy", 1)]
    with ivm.connect(state) as db:
        with pytest.raises(ivm.SqlError):
            db.read("rich_cities")
        db.ingest("orders", [{"id": 9, "customer": "ann", "amount": 1}])
        assert rows(db.read("per_customer")) == [("ann", 3), ("cy", 1)]


def test_failed_ingest_is_not_persisted(tmp_path, reference):
    state = tmp_path / "state"
    build(state)
    with ivm.connect(state) as db, pytest.raises(ivm.ConstraintError):
        db.ingest({"orders": [{"id": 8, "customer": "ann", "amount": 1}],
                   "customers": [{"name": "ann", "city": "paris"}]})
    with ivm.connect(state) as db:
        assert db.epoch == 3
        assert contents(db) == contents(reference)


def test_two_state_dirs_are_independent(tmp_path):
    a, b = ivm.connect(tmp_path / "a"), ivm.connect(tmp_path / "b")
    a.execute("CREATE TABLE t (v BIGINT)")
    b.execute("CREATE TABLE t (v VARCHAR)")
    a.ingest("t", [{"v": 1}])
    a.close()
    b.close()
    with ivm.connect(tmp_path / "b") as db:
        assert db.epoch == 0
        assert db.read("t").schema.field("v").type == pa.string()


def test_second_session_on_same_state_is_refused_or_consistent(tmp_path):
    state = tmp_path / "state"
    first = ivm.connect(state)
    first.execute("CREATE TABLE t (k VARCHAR)")
    try:
        second = ivm.connect(state)
    except ivm.StateError:
        first.close()
        return  # refusing a second writer is a fine answer
    # otherwise both sessions must see one consistent state
    first.ingest("t", [{"k": "x"}])
    assert second.epoch == first.epoch == 1
    second.execute("CREATE VIEW v AS SELECT k FROM t")
    first.ingest("t", [{"k": "y"}])
    assert rows(second.read("v")) == [("x",), ("y",)]
    assert rows(first.read("v")) == [("x",), ("y",)]
