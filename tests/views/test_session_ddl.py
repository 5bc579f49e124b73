"""Session DDL (CREATE TABLE / [MATERIALIZED] VIEW / DROP), epoch, db.sql reads."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from oracle.rows import rows

import ivm


@pytest.fixture
def db():
    session = ivm.connect()
    yield session
    session.close()


def test_new_session_is_at_epoch_zero(db):
    assert db.epoch == 0
    db.execute("CREATE TABLE t (id BIGINT)")
    assert db.epoch == 0
    db.ingest("t", [{"id": 1}])
    assert db.epoch == 1
    db.ingest({"t": [{"id": 2}]})
    assert db.epoch == 2


def test_create_table_types_and_empty_read(db):
    db.execute("""
        CREATE TABLE t (
            id INTEGER PRIMARY KEY, name TEXT NOT NULL, price DECIMAL(12,2),
            ts TIMESTAMP, d DATE, ok BOOLEAN, f DOUBLE, big BIGINT
        )
    """)
    table = db.read("t")
    assert table.num_rows == 0
    assert table.column_names == ["id", "name", "price", "ts", "d", "ok", "f", "big"]
    assert table.schema.types == [
        pa.int32(), pa.string(), pa.decimal128(12, 2), pa.timestamp("us"), pa.date32(),
        pa.bool_(), pa.float64(), pa.int64(),
    ]
    row = {
        "id": 1, "name": "a", "price": Decimal("9.99"),
        "ts": datetime.datetime(2024, 1, 2, 3, 4, 5), "d": datetime.date(2024, 1, 2),
        "ok": True, "f": 0.5, "big": 2**40,
    }
    db.ingest("t", [row])
    assert db.read("t").to_pylist() == [row]


def test_create_view_and_materialized_view(db):
    db.execute("""
        CREATE TABLE t (k VARCHAR, v BIGINT);
        CREATE VIEW a AS SELECT k, COUNT(*) AS n FROM t GROUP BY k;
        CREATE MATERIALIZED VIEW b AS SELECT k, SUM(v) AS s FROM t GROUP BY k;
    """)
    delta = db.ingest("t", [{"k": "x", "v": 1}, {"k": "x", "v": 2}])
    assert rows(delta["a"]) == [("x", 2, 1)]
    assert rows(delta["b"]) == [("x", 3, 1)]
    assert rows(db.read("b")) == [("x", 3)]


def test_view_columns_follow_select_list(db):
    db.execute("""
        CREATE TABLE t (id BIGINT, k VARCHAR, v BIGINT);
        CREATE VIEW s AS SELECT v, k AS key, id * 10 AS id10 FROM t;
    """)
    assert db.read("s").column_names == ["v", "key", "id10"]
    delta = db.ingest("t", [{"id": 1, "k": "a", "v": 5}])
    assert delta["s"].column_names == ["v", "key", "id10", "__w"]
    assert rows(delta["s"]) == [(5, "a", 10, 1)]


def test_create_or_replace_view(db):
    db.execute("CREATE TABLE t (id BIGINT); CREATE VIEW v AS SELECT id FROM t")
    db.ingest("t", [{"id": 1}])
    db.execute("CREATE OR REPLACE VIEW v AS SELECT id + 1 AS next FROM t")
    assert rows(db.read("v")) == [(2,)]
    delta = db.ingest("t", [{"id": 5}])
    assert rows(delta["v"]) == [(6, 1)]


def test_if_not_exists_keeps_the_existing_object(db):
    db.execute("CREATE TABLE t (id BIGINT); CREATE VIEW v AS SELECT id FROM t")
    db.execute("CREATE TABLE IF NOT EXISTS t (z VARCHAR)")
    db.execute("CREATE VIEW IF NOT EXISTS v AS SELECT id * 2 AS z FROM t")
    db.ingest("t", [{"id": 3}])
    assert db.read("t").column_names == ["id"]
    assert rows(db.read("v")) == [(3,)]


def test_reserved_weight_column_name_is_refused(db):
    with pytest.raises(ivm.SqlError):
        db.execute("CREATE TABLE t (__w BIGINT)")
    db.execute("CREATE TABLE t (id BIGINT)")
    with pytest.raises(ivm.SqlError):
        db.execute("CREATE VIEW v AS SELECT id AS __w FROM t")


def test_quoted_names_with_spaces_and_quotes(db):
    db.execute('CREATE TABLE "order lines" (id BIGINT, "qty""x" BIGINT)')
    db.execute('CREATE VIEW "line totals" AS SELECT SUM("qty""x") AS total FROM "order lines"')
    db.ingest("order lines", [{"id": 1, 'qty"x': 4}, {"id": 2, 'qty"x': 5}])
    assert rows(db.read("line totals")) == [(9,)]


def test_mixed_case_table_name_usable_in_view(db):
    db.execute("CREATE TABLE Orders (Id BIGINT PRIMARY KEY, Amount BIGINT)")
    db.execute("CREATE VIEW totals AS SELECT SUM(Amount) AS s FROM Orders")
    db.ingest("Orders", [{"Id": 1, "Amount": 4}])
    assert rows(db.read("totals")) == [(4,)]


def test_mixed_case_view_name_usable_in_view(db):
    db.execute("""
        CREATE TABLE t (id BIGINT);
        CREATE VIEW Evens AS SELECT id FROM t WHERE id % 2 = 0;
    """)
    db.execute("CREATE VIEW n_evens AS SELECT COUNT(*) AS n FROM Evens")
    db.ingest("t", [{"id": 1}, {"id": 2}, {"id": 4}])
    assert rows(db.read("n_evens")) == [(2,)]


def test_mixed_case_column_names(db):
    db.execute("""
        CREATE TABLE t (Id BIGINT PRIMARY KEY, Amount BIGINT);
        CREATE VIEW v AS SELECT Id, SUM(Amount) AS Total FROM t GROUP BY Id;
    """)
    db.ingest("t", [{"Id": 1, "Amount": 2}])
    assert db.read("v").to_pylist() == [{"Id": 1, "Total": 2}]


def test_unsupported_create_kinds(db):
    with pytest.raises(ivm.UnsupportedSQL):
        db.execute("CREATE TABLE t AS SELECT 1 AS x")
    with pytest.raises(ivm.UnsupportedSQL):
        db.execute("CREATE SCHEMA s")


def test_connect_rejects_unknown_options():
    with pytest.raises(TypeError):
        ivm.connect(colour="red")


def test_context_manager_closes(tmp_path):
    with ivm.connect(tmp_path / "s") as db:
        db.execute("CREATE TABLE t (id BIGINT)")
    with ivm.connect(tmp_path / "s") as db:
        assert db.read("t").num_rows == 0


# -- db.sql ------------------------------------------------------------------------------


@pytest.fixture
def shop(db):
    db.execute("""
        CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
        CREATE TABLE customers (name VARCHAR PRIMARY KEY, city VARCHAR);
        CREATE VIEW revenue AS
            SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY customer;
    """)
    db.ingest({
        "orders": [{"id": 1, "customer": "ann", "amount": 10},
                   {"id": 2, "customer": "ann", "amount": 5},
                   {"id": 3, "customer": "bob", "amount": 200}],
        "customers": [{"name": "ann", "city": "oslo"}, {"name": "bob", "city": "rome"}],
    })
    return db


def test_sql_over_a_view(shop):
    result = shop.sql("SELECT customer FROM revenue WHERE total > 100")
    assert result.to_pylist() == [{"customer": "bob"}]


def test_sql_joining_view_and_table(shop):
    result = shop.sql(
        "SELECT c.city, r.total, r.n FROM revenue r JOIN customers c ON r.customer = c.name "
        "ORDER BY c.city"
    )
    assert [tuple(r.values()) for r in result.to_pylist()] == [("oslo", 15, 2), ("rome", 200, 1)]


def test_sql_sees_copies_of_duplicate_rows(db):
    db.execute("CREATE TABLE bag (v BIGINT)")
    db.ingest("bag", [{"v": 7, "__w": 3}])
    assert db.sql("SELECT COUNT(*) AS c, SUM(v) AS s FROM bag").to_pylist() == [{"c": 3, "s": 21}]
    assert db.read("bag").num_rows == 3


def test_sql_with_cte_and_set_operation(shop):
    result = shop.sql(
        "WITH o AS (SELECT customer FROM orders) SELECT customer FROM o "
        "UNION SELECT name FROM customers ORDER BY 1"
    )
    assert result.to_pylist() == [{"customer": "ann"}, {"customer": "bob"}]


@pytest.mark.parametrize(
    "statement",
    [
        "DROP VIEW revenue",
        "DELETE FROM orders",
        "INSERT INTO orders VALUES (9, 'x', 1)",
        "UPDATE orders SET amount = 0",
        "CREATE VIEW x AS SELECT 1",
        "SELECT 1; DROP VIEW revenue",
    ],
)
def test_sql_refuses_non_select(shop, statement):
    with pytest.raises(ivm.SqlError):
        shop.sql(statement)
    assert rows(shop.read("revenue")) == [("ann", 15, 2), ("bob", 200, 1)]
    assert shop.read("orders").num_rows == 3
