"""CREATE VIEW builds the arrangements its epochs will read when the inputs the last
epoch changed change again (``views.warmup``): nothing else is built, nothing is
written, and the view is maintained exactly as without warming."""

from __future__ import annotations

import duckdb
import pyarrow as pa

import ivm

TABLES = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR);
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, amount BIGINT);
"""
BY_REGION = (
    "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
    "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region"
)


def loaded() -> ivm.Session:
    """Customers loaded in one epoch, orders in the next (the last epoch's change)."""
    db = ivm.connect()
    db.execute(TABLES)
    db.ingest("customers", pa.table({"id": [1, 2, 3], "region": ["n", "s", None]}))
    db.ingest("orders", pa.table({"id": [10, 11, 12, 13], "customer": [1, 2, 2, None],
                                  "amount": [5, 7, 9, 11]}))
    return db


def arranged(db: ivm.Session) -> set[tuple[str, tuple[str, ...]]]:
    return {(s.table, s.key) for s in db._arrangements.sizes()}


def test_create_view_arranges_what_a_change_of_the_last_changed_inputs_reads() -> None:
    db = loaded()
    assert not arranged(db)
    db.execute(f"CREATE VIEW by_region AS {BY_REGION}")
    built = arranged(db)
    # orders changed last: an orders change reads customers by id and the group versions;
    # orders by customer (read only when customers change) is not built.
    assert ('"__ivm_rel_customers"', ("id",)) in built
    assert any(table.startswith('"__ivm_op_by_region#versions') for table, _ in built)
    assert not any(table == '"__ivm_rel_orders"' for table, _ in built)


def test_warming_writes_nothing_and_the_view_stays_exact() -> None:
    db = loaded()
    before = {t: db._con.execute(f"SELECT count(*) FROM {t}").fetchall()
              for t in ('"__ivm_rel_orders"', '"__ivm_rel_customers"')}
    epoch = db.epoch
    db.execute(f"CREATE VIEW by_region AS {BY_REGION}")
    assert db.epoch == epoch
    assert {t: db._con.execute(f"SELECT count(*) FROM {t}").fetchall() for t in before} == before
    db.ingest("orders", pa.table({"id": [10, 14], "customer": [1, 3], "amount": [5, 2],
                                  "__w": [-1, 1]}))
    db.ingest("customers", pa.table({"id": [2, 2], "region": ["s", "w"], "__w": [-1, 1]}))
    expected = duckdb.sql(
        "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n FROM "
        "(VALUES (11, 2, 7), (12, 2, 9), (13, NULL, 11), (14, 3, 2)) o(id, customer, amount) "
        "JOIN (VALUES (1, 'n'), (2, 'w'), (3, NULL)) c(id, region) ON o.customer = c.id "
        "GROUP BY c.region"
    ).fetchall()
    got = db.sql("SELECT region, total, n FROM by_region").to_pylist()
    assert sorted(((r["region"], r["total"], r["n"]) for r in got), key=str) == sorted(
        expected, key=str
    )


def test_a_view_over_inputs_no_epoch_changed_is_not_warmed() -> None:
    db = ivm.connect()
    db.execute(TABLES)
    db.execute(f"CREATE VIEW by_region AS {BY_REGION}")
    assert not arranged(db)
