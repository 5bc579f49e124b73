"""Embedded sessions read state at keys through arrangements: shared, kept in step with
their traces after commits only, forgotten when in doubt, and exact whatever a hash says."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from oracle.harness import Epoch, Harness

import ivm
from ivm.execution.arrangements import Arrangements
from ivm.execution.exact import row_hash_sql
from ivm.operators.base import At
from ivm.storage.arrangement import Arrangement

TABLES = [
    "CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR)",
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, amount BIGINT)",
]
VIEWS = {
    "by_region": "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
                 "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region",
    "big_customers": "SELECT c.id, c.region, o.amount FROM customers c "
                     "JOIN orders o ON o.customer = c.id WHERE o.amount > 50",
    "per_customer": "SELECT customer, COUNT(*) AS n, SUM(amount) AS total FROM orders "
                    "GROUP BY customer",
}


def epochs() -> list[Epoch]:
    """Customers first, then orders in both directions, then a customer leaving."""
    customers = [("insert", (i, "north" if i % 2 else "south")) for i in range(6)]
    orders = [("insert", (i, i % 6, 10 * i)) for i in range(12)]
    return [
        Epoch.of({"customers": customers}),
        Epoch.of({"orders": orders}),
        Epoch.of({"orders": [("delete", (3, 3, 30)), ("update", (8, 2, 80), (8, 5, 81))]}),
        Epoch.of({"customers": [("update", (5, "north"), (5, "east"))],
                  "orders": [("insert", (20, 5, 99))]}),
        Epoch.of({"customers": [("delete", (1, "north"))]}),
    ]


def run(harness: Harness) -> None:
    harness.create_views(VIEWS)
    for epoch in epochs():
        harness.apply(epoch)


def test_views_read_shared_arrangements_and_stay_exact() -> None:
    harness = Harness(TABLES)
    try:
        run(harness)
        sizes = harness.db._arrangements.sizes()
        by_table = {(s.table, s.key): s for s in sizes}
        customers = by_table[('"__ivm_rel_customers"', ("id",))]
        assert set(customers.readers) == {"by_region", "big_customers"}  # one, shared
        assert customers.entries >= 5  # 5 live rows, and history not merged away yet
        text = harness.db.explain("by_region", analyze=True)
        assert f"the rows of 'customers' by (id): {customers.entries} entries" in text
        assert "read by 'big_customers', 'by_region'" in text
    finally:
        harness.close()


def test_a_rolled_back_epoch_leaves_arrangements_as_they_were() -> None:
    db = ivm.connect()
    db.execute(";".join(TABLES) + "; CREATE VIEW ratio AS SELECT o.id, "
               "CAST(100 / (o.amount - 7) AS INTEGER) AS r, c.region FROM orders o "
               "JOIN customers c ON o.customer = c.id")
    db.ingest("customers", [{"id": 1, "region": "north"}])
    db.ingest("orders", [{"id": 1, "customer": 1, "amount": 10}])
    db.ingest("customers", [{"id": 2, "region": "south"}])  # arranges orders by customer
    before = {(s.table, s.key): s.entries for s in db._arrangements.sizes()}
    with pytest.raises(ivm.ExecutionError):  # 100 / 0 fails the view
        db.ingest({"orders": [{"id": 2, "customer": 2, "amount": 7}],
                   "customers": [{"id": 3, "region": "east"}]})
    assert {(s.table, s.key): s.entries for s in db._arrangements.sizes()} == before
    db.ingest({"orders": [{"id": 2, "customer": 2, "amount": 8}],
               "customers": [{"id": 3, "region": "east"}]})
    assert sorted(db.read("ratio").to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "r": 33, "region": "north"}, {"id": 2, "r": 100, "region": "south"}]


def test_a_failed_after_commit_action_drops_every_arrangement() -> None:
    harness = Harness(TABLES)
    try:
        harness.create_views(VIEWS)
        first, second, *rest = epochs()
        harness.apply(first)
        harness.apply(second)
        assert harness.db._arrangements.sizes()
        harness.db._commit_actions_failed()
        assert not harness.db._arrangements.sizes()
        for epoch in rest:  # built again from the traces, still exact
            harness.apply(epoch)
    finally:
        harness.close()


def test_dropping_a_table_forgets_its_arrangements() -> None:
    db = ivm.connect()
    db.execute(";".join(TABLES) + f"; CREATE VIEW big_customers AS {VIEWS['big_customers']}")
    db.ingest("customers", [{"id": 1, "region": "north"}])
    db.ingest("orders", [{"id": 1, "customer": 1, "amount": 60}])
    assert any(s.table == '"__ivm_rel_customers"' for s in db._arrangements.sizes())
    db.execute("DROP VIEW big_customers; DROP TABLE customers")
    assert not any(s.table == '"__ivm_rel_customers"' for s in db._arrangements.sizes())
    db.execute("CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR); "
               f"CREATE VIEW big_customers AS {VIEWS['big_customers']}")
    db.ingest("customers", [{"id": 1, "region": "west"}])
    assert db.read("big_customers").to_pylist() == [{"id": 1, "region": "west", "amount": 60}]


def test_an_arrangement_goes_with_the_last_view_that_reads_it() -> None:
    harness = Harness(TABLES)
    try:
        run(harness)
        db = harness.db
        customers = ('"__ivm_rel_customers"', ("id",))

        def held() -> set[tuple[str, tuple[str, ...]]]:
            return {(s.table, s.key) for s in db._arrangements.sizes()}

        assert customers in held()
        db.execute("DROP VIEW big_customers")
        assert customers in held()  # by_region reads it still
        db.execute("DROP VIEW by_region")
        assert customers not in held()
        assert not [key for key in held() if "by_region" in key[0]]
        db.ingest("orders", [{"id": 30, "customer": 4, "amount": 5}])  # the rest stays exact
        query = VIEWS["per_customer"] + " ORDER BY customer"
        assert db.sql("SELECT * FROM per_customer ORDER BY customer").to_pylist() == (
            db.sql(query).to_pylist())
    finally:
        harness.close()


def test_rows_of_colliding_hashes_are_told_apart_by_their_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every key hashed alike: each read gets the whole trace, and must still be exact."""
    lookup = Arrangement.lookup

    def everything(self: Arrangement, wanted: np.ndarray, positive_only: bool = False):
        return lookup(self, np.unique(np.concatenate([b.keys for b in self.batches] or
                                                     [np.empty(0, np.uint64)])),
                      positive_only)

    monkeypatch.setattr(Arrangement, "lookup", everything)
    harness = Harness(TABLES)
    try:
        run(harness)
    finally:
        harness.close()


def test_lossless_rows_round_trip() -> None:
    """HUGEINT, UUID, TIME WITH TIME ZONE: an arranged row reads back exactly."""
    db = ivm.connect()
    arrangements = Arrangements(db._con)
    db._con.execute(
        "CREATE TABLE x AS SELECT 1::BIGINT AS k, 12345678901234567890123456789::HUGEINT AS h,"
        " 'e3e70682-c209-4cac-629f-6fbed82c07cd'::UUID AS u, '12:00:00+05'::TIMETZ AS tz,"
        " 1::BIGINT AS __w"
    )
    rows, _ = arrangements.lookup("x", At(("k",), "SELECT 1"), live=True)
    db._con.register("back", rows)
    assert db._con.execute("SELECT h, u::VARCHAR, tz::VARCHAR FROM back").fetchall() == [
        (12345678901234567890123456789, "e3e70682-c209-4cac-629f-6fbed82c07cd", "12:00:00+05")
    ]


def test_an_unread_arrangement_is_dropped_not_merged_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("ivm.execution.arrangements.UNMERGED_LIMIT", 4)
    orders_by_customer = ('"__ivm_rel_orders"', ("customer",))
    harness = Harness(TABLES)
    try:
        harness.create_views(VIEWS)
        first, second, *rest = epochs()
        harness.apply(first)
        harness.apply(second)
        harness.apply(Epoch.of({"customers": [("insert", (7, "west"))]}))  # arranges orders
        assert orders_by_customer in {(s.table, s.key) for s in harness.db._arrangements.sizes()}
        # More rows committed unread than it holds (12) and than the limit: dropped.
        harness.apply(Epoch.of({"orders": [("insert", (30 + i, i % 8, i)) for i in range(14)]}))
        assert orders_by_customer not in {
            (s.table, s.key) for s in harness.db._arrangements.sizes()}
        for epoch in rest:  # read again: built from the table, exact
            harness.apply(epoch)
        assert orders_by_customer in {(s.table, s.key) for s in harness.db._arrangements.sizes()}
    finally:
        harness.close()


WIDE_TABLES = [
    "CREATE TABLE customers (cid BIGINT PRIMARY KEY, region VARCHAR)",
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, amount BIGINT, "
    "note VARCHAR, urgent BOOLEAN)",
]


def wide_epochs() -> list[Epoch]:
    """Orders equal but for their id and note (equal as the arrangement holds them), then
    customer changes, which read orders by customer."""
    orders = [("insert", (i, i % 3, 10 * (i % 2), f"n{i}", i % 4 == 0)) for i in range(12)]
    return [
        Epoch.of({"orders": orders}),
        Epoch.of({"customers": [("insert", (c, f"r{c % 2}")) for c in range(4)]}),
        Epoch.of({"orders": [("delete", orders[0][1]), ("delete", orders[6][1])],
                  "customers": [("update", (1, "r1"), (1, "r9"))]}),
        Epoch.of({"customers": [("delete", (2, "r0")), ("insert", (7, None))],
                  "orders": [("insert", (40, 7, 5, None, True))]}),
        Epoch.of({"customers": [("update", (7, None), (7, "r7"))]}),
    ]


def test_an_arrangement_holds_the_columns_its_readers_use_and_widens_for_more() -> None:
    harness = Harness(WIDE_TABLES)
    try:
        harness.create_views({"totals": "SELECT c.region, SUM(o.amount) AS total, COUNT(*) "
                              "AS n FROM customers c JOIN orders o ON o.customer = c.cid "
                              "GROUP BY c.region"})
        first, second, third, fourth, fifth = wide_epochs()
        for epoch in (first, second, third, fourth):
            harness.apply(epoch)  # the fourth merges the third's deletes into it
        held = {(s.table, s.key): s for s in harness.db._arrangements.sizes()}
        orders = held[('"__ivm_rel_orders"', ("customer",))]
        # orders equal but for id and note are one row as it holds them: 6 pairs of
        # (customer, amount) twice each, of which the deletes took one out
        assert orders.columns == ("customer", "amount") and orders.of_columns == 5
        arranged = harness.db._arrangements._arranged['"__ivm_rel_orders"'][("customer",)]
        contents = arranged.contents().to_pylist()
        assert len(contents) == 5 and {r["__w"] for r in contents} == {2}
        text = harness.db.explain("totals", analyze=True)
        assert "the rows of 'orders' by (customer), 2 of its 5 columns" in text
        harness.create_views({"urgent_notes": "SELECT c.cid, c.region, o.note FROM customers "
                              "c JOIN orders o ON o.customer = c.cid WHERE o.urgent"})
        harness.apply(fifth)  # the arrangement widened for the second view; both exact
        held = {(s.table, s.key): s for s in harness.db._arrangements.sizes()}
        widened = held[('"__ivm_rel_orders"', ("customer",))]
        assert set(widened.columns) == {"customer", "amount", "note", "urgent"}
        assert set(widened.readers) == {"totals", "urgent_notes"}
    finally:
        harness.close()


def test_row_hashes_tell_apart_values_duckdb_hashes_alike() -> None:
    con = duckdb.connect()
    # 128-bit numbers hash as the xor of their halves' hashes: 0 and -1 alike, and two
    # numbers whose halves are swapped (5 and 5 * 2**64).
    pairs = [("HUGEINT", "0", "-1"), ("DECIMAL(38,2)", "0", "-0.01"),
             ("HUGEINT", "5", str(5 * 2**64)), ("UHUGEINT", "7", str(7 * 2**64)),
             ("DECIMAL(38,0)", "3", str(3 * 2**64)),
             ("UUID", "'00000000-0000-0000-0000-000000000000'",
              "'ffffffff-ffff-ffff-ffff-ffffffffffff'"),
             ("DOUBLE", "0.0", "-0.0"), ("INTEGER[]", "[]", "NULL")]
    for type_, one, other in pairs:
        hashed = row_hash_sql([("k", "INTEGER"), ("a", type_), ("b", type_)])
        values = con.execute(
            f"SELECT {hashed} FROM (VALUES (1, {one}::{type_}, {one}::{type_}), "
            f"(1, {other}::{type_}, {other}::{type_})) AS t(k, a, b)"
        ).fetchall()
        assert values[0] != values[1], type_
