"""What a new user meets first: listings, refusals that name the problem, errors in their terms.

Each case here was found by trying ivm as a new user would; every refusal must
leave tables and views exactly as they were.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import ivm


@pytest.fixture
def db():
    session = ivm.connect()
    session.execute("""
        CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR NOT NULL, amount DECIMAL(12,2),
                             code VARCHAR);
        CREATE TABLE events (k INTEGER, v DOUBLE);
        CREATE VIEW totals AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
    """)
    yield session
    session.close()


# -- listings ------------------------------------------------------------------------------


def test_tables_and_views_are_listed_with_schema_and_sql(db) -> None:
    assert list(db.tables) == ["orders", "events"]
    orders = db.tables["orders"]
    assert orders.columns == (
        ("id", "BIGINT"), ("customer", "VARCHAR"), ("amount", "DECIMAL(12,2)"),
        ("code", "VARCHAR"),
    )
    assert orders.primary_key == ("id",)
    assert orders.arrow_schema.field("amount").type == pa.decimal128(12, 2)
    # the SQL recreates the same table
    scratch = duckdb.connect()
    scratch.execute(orders.sql)
    assert [r[:2] for r in scratch.execute("DESCRIBE orders").fetchall()] == list(orders.columns)
    assert "NOT NULL" in orders.sql and "PRIMARY KEY" in orders.sql
    totals = db.views["totals"]
    assert totals.sql == "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer"
    assert totals.columns == (("customer", "VARCHAR"), ("total", "DECIMAL(38,2)"))
    assert totals.sources == ("orders",)
    assert totals.arrow_schema == db.read("totals").schema


def test_listings_are_read_only_and_follow_ddl(db) -> None:
    with pytest.raises(TypeError):
        db.views["x"] = db.views["totals"]  # type: ignore[index]
    db.execute("CREATE VIEW big AS SELECT id FROM orders WHERE amount > 10")
    assert "big" in db.views
    db.execute("DROP VIEW big")
    assert "big" not in db.views and list(db.views) == ["totals"]


# -- refusals ------------------------------------------------------------------------------


def test_upsert_without_a_primary_key_is_refused(db) -> None:
    db.ingest("events", [{"k": 1, "v": 0.5}])
    with pytest.raises(ivm.SchemaError, match="events.*no PRIMARY KEY.*upsert"):
        db.ingest("events", [{"k": 1, "v": 0.5}], mode="upsert")
    assert db.read("events").num_rows == 1 and db.epoch == 1


def test_a_duckdb_file_that_is_not_ivm_state_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(file))
    con.execute("CREATE TABLE sales (id INTEGER); INSERT INTO sales VALUES (1)")
    con.close()
    with pytest.raises(ivm.StateError, match="not ivm state"):
        ivm.connect(file)
    con = duckdb.connect(str(file), read_only=True)
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    con.close()
    assert tables == {"sales"}  # ivm added nothing
    # an empty DuckDB file becomes ivm state
    empty = tmp_path / "new.duckdb"
    duckdb.connect(str(empty)).close()
    with ivm.connect(empty) as fresh:
        fresh.execute("CREATE TABLE t (a INTEGER)")


# -- execution errors in the user's terms -----------------------------------------------


def test_a_failing_view_expression_is_named_not_generated_sql(db) -> None:
    db.execute("CREATE VIEW coded AS SELECT id, CAST(code AS INTEGER) + 1 AS c FROM orders")
    with pytest.raises(ivm.ExecutionError) as caught:
        db.ingest("orders", [{"id": 1, "customer": "a", "amount": Decimal("1.00"),
                              "code": "x1"}])
    message = str(caught.value)
    assert "view 'coded'" in message
    assert "CAST(orders.code AS INT)" in message or "CAST(orders.code AS INTEGER)" in message
    assert "x1" in message  # DuckDB's own words about the value
    assert "__ivm" not in message and "LINE 1" not in message and '"__' not in message
    assert db.epoch == 0 and db.read("orders").num_rows == 0


def test_a_view_failing_on_existing_rows_names_itself_at_create(db) -> None:
    db.ingest("orders", [{"id": 1, "customer": "a", "amount": Decimal("1.00"), "code": "x"}])
    with pytest.raises(ivm.ExecutionError, match="view 'bad'.*CAST"):
        db.execute("CREATE VIEW bad AS SELECT CAST(code AS INTEGER) AS c FROM orders")
    assert "bad" not in db.views
