"""CDC as it really arrives (issue #27, item 11): Debezium key-only deletes and updates
without ``before``, truncates, and upserts holding several versions of one key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.settings import RANDOM_CDC, examples

import ivm

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR NOT NULL, amount BIGINT);
    CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total, COUNT(*) AS n
        FROM orders GROUP BY customer;
"""
VIEW_SQL = "SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY customer"


def rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def order(i: int, customer: str = "a", amount: int | None = 5) -> dict[str, Any]:
    return {"id": i, "customer": customer, "amount": amount}


def exact(db: Any) -> None:
    assert rows(db.read("revenue")) == rows(db.sql(VIEW_SQL))


def envelope(events: list[tuple[str, dict | None, dict | None]]) -> pa.Table:
    """A Debezium batch as Arrow: ``before`` / ``after`` structs of every column (a
    key-only ``before`` has its other fields null, as Debezium sends it)."""
    struct = pa.struct([("id", pa.int64()), ("customer", pa.string()), ("amount", pa.int64())])
    return pa.table({
        "op": pa.array([e[0] for e in events], pa.string()),
        "before": pa.array([e[1] for e in events], struct),
        "after": pa.array([e[2] for e in events], struct),
    })


@pytest.fixture
def db() -> Any:
    session = ivm.connect()
    session.execute(DDL)
    session.ingest("orders", [order(1, "a", 5), order(2, "b", 7), order(3, "b", 1)])
    yield session
    session.close()


def test_a_delete_carrying_only_the_key_deletes_the_row_of_the_key(db: Any) -> None:
    delta = db.ingest("orders", [
        {"op": "d", "before": {"id": 2}, "after": None},  # the struct has only the key
    ])
    assert rows(delta["revenue"]) == [("b", 1, 1, 1), ("b", 8, 2, -1)]
    db.ingest("orders", envelope([("d", {"id": 1}, None)]))  # other fields null
    assert rows(db.read("orders")) == [(3, "b", 1)]
    exact(db)


def test_key_only_changes_follow_the_batch_order(db: Any) -> None:
    db.ingest("orders", envelope([
        ("d", {"id": 1}, None),                     # the stored row
        ("c", None, order(1, "z", 9)),
        ("u", None, order(1, "y", 4)),              # an update without before
        ("c", None, order(4, "x", 2)),
        ("d", {"id": 4}, None),                     # the row the batch inserted
        ("u", None, order(3, "b", 10)),
    ]))
    assert rows(db.read("orders")) == [(1, "y", 4), (2, "b", 7), (3, "b", 10)]
    exact(db)


def test_a_key_only_delete_of_an_absent_key_is_refused(db: Any) -> None:
    with pytest.raises(ivm.ConstraintError, match=r"deletes key \{'id': 9\}.*no row holds"):
        db.ingest("orders", envelope([("d", {"id": 9}, None)]))
    assert db.epoch == 1


def test_a_truncate_empties_the_table_then_what_follows_applies(db: Any) -> None:
    delta = db.ingest("orders", envelope([
        ("c", None, order(5, "q", 1)),  # superseded by the truncate
        ("t", None, None),
        ("c", None, order(1, "a", 6)),
        ("u", None, order(1, "c", 6)),
    ]))
    assert rows(db.read("orders")) == [(1, "c", 6)]
    assert rows(delta["revenue"]) == [("a", 5, 1, -1), ("b", 8, 2, -1), ("c", 6, 1, 1)]
    db.ingest("orders", envelope([("t", None, None)]))
    assert db.read("orders").num_rows == 0 and db.read("revenue").num_rows == 0


def test_an_upsert_applies_the_last_version_of_each_key(db: Any) -> None:
    db.ingest("orders", [order(1, "a", 1), order(4, "d", 1), order(1, "a", 2), order(4, "d", 3)],
              mode="upsert")
    assert rows(db.read("orders")) == [(1, "a", 2), (2, "b", 7), (3, "b", 1), (4, "d", 3)]
    batch = pa.table({"id": [2, 2, 2, 3], "customer": ["b", "b", "b", "c"],
                      "amount": [30, 10, 20, 4], "lsn": [30, 10, 20, 1]})
    db.ingest("orders", batch, mode="upsert", sequence="lsn")
    assert rows(db.read("orders")) == [(1, "a", 2), (2, "b", 30), (3, "c", 4), (4, "d", 3)]
    exact(db)


def test_sequence_needs_an_upsert_and_a_column(db: Any) -> None:
    with pytest.raises(ivm.SchemaError, match="needs mode='upsert'"):
        db.ingest("orders", [order(7)], sequence="lsn")
    with pytest.raises(ivm.SchemaError, match="names no column"):
        db.ingest("orders", [order(7)], mode="upsert", sequence="lsn")


EVENTS = st.lists(
    st.tuples(st.sampled_from("cudkt"), st.integers(0, 3), st.sampled_from("ab"),
              st.integers(-2, 2)),
    max_size=12,
)


@settings(RANDOM_CDC, max_examples=examples(15))  # small workloads: several of them
@given(batches=st.lists(EVENTS, min_size=1, max_size=4))
def test_random_debezium_streams_with_key_only_changes(batches: list[list[tuple]]) -> None:
    """Random Debezium events, each valid against a model of the table: creates of free
    keys, updates and deletes (whole or key-only) of held ones, truncates."""
    db = ivm.connect()
    db.execute(DDL)
    model: dict[int, dict[str, Any]] = {}
    for batch in batches:
        events = []
        for code, key, customer, amount in batch:
            row = order(key, customer, amount)
            if code == "t":
                events.append(("t", None, None))
                model.clear()
            elif key not in model:
                events.append(("c", None, row))
                model[key] = row
            elif code == "c" or code == "u":
                events.append(("u", model[key] if amount % 2 else None, row))
                model[key] = row
            else:
                events.append(("d", model[key] if code == "d" else {"id": key}, None))
                del model[key]
        db.ingest("orders", envelope(events))
        assert rows(db.read("orders")) == sorted(tuple(r.values()) for r in model.values())
        exact(db)
    db.close()


def test_cdc_as_it_arrives_on_spark(spark: Any, tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        db.ingest("orders", [order(1, "a", 5), order(2, "b", 7)])
        db.ingest("orders", envelope([("d", {"id": 1}, None), ("u", None, order(2, "b", 8))]))
        assert rows(db.read("orders")) == [(2, "b", 8)]
        frame = spark.createDataFrame(
            [(3, "c", 1, 2), (3, "c", 9, 1), (2, "b", 3, 5)],
            "id long, customer string, amount long, lsn long",
        )
        db.ingest("orders", frame, mode="upsert", sequence="lsn")
        assert rows(db.read("orders")) == [(2, "b", 3), (3, "c", 1)]
        db.ingest("orders", envelope([("t", None, None), ("c", None, order(4, "d", 1))]))
        assert rows(db.read("orders")) == [(4, "d", 1)]
        exact(db)
    finally:
        db.close()
