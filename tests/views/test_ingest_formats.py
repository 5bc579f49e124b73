"""db.ingest with every batch format (API.md, "Batches"), through the public API.

Each test checks the returned deltas and db.read contents against hand-computed values.
"""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from oracle.rows import rows

import ivm

SCHEMA = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
    CREATE VIEW revenue AS
        SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY customer;
    CREATE VIEW big AS SELECT id, customer FROM orders WHERE amount >= 10;
"""

SEED = [
    {"id": 1, "customer": "ann", "amount": 10},
    {"id": 2, "customer": "ann", "amount": 5},
    {"id": 3, "customer": "bob", "amount": 7},
]




@pytest.fixture
def db():
    session = ivm.connect()
    session.execute(SCHEMA)
    yield session
    session.close()


@pytest.fixture
def seeded(db):
    db.ingest("orders", SEED)
    return db


def test_list_of_dicts_inserts(db):
    delta = db.ingest("orders", SEED)
    assert set(delta) == {"revenue", "big"}
    assert rows(delta["revenue"]) == [("ann", 15, 2, 1), ("bob", 7, 1, 1)]
    assert rows(delta["big"]) == [(1, "ann", 1)]
    assert delta["revenue"].column_names == ["customer", "total", "n", "__w"]
    assert rows(db.read("orders")) == [(1, "ann", 10), (2, "ann", 5), (3, "bob", 7)]
    assert rows(db.read("revenue")) == [("ann", 15, 2), ("bob", 7, 1)]
    assert db.epoch == 1


def test_pyarrow_table(db):
    batch = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "customer": ["ann", "bob"],
            "amount": pa.array([3, 30], pa.int64()),
        }
    )
    delta = db.ingest("orders", batch)
    assert rows(delta["revenue"]) == [("ann", 3, 1, 1), ("bob", 30, 1, 1)]
    assert rows(delta["big"]) == [(2, "bob", 1)]
    assert rows(db.read("big")) == [(2, "bob")]


def test_record_batch(db):
    batch = pa.RecordBatch.from_pydict(
        {"id": [4, 5], "customer": ["cy", "cy"], "amount": [1, 2]}
    )
    delta = db.ingest("orders", batch)
    assert rows(delta["revenue"]) == [("cy", 3, 2, 1)]
    assert delta["big"].num_rows == 0
    assert delta["big"].column_names == ["id", "customer", "__w"]
    assert rows(db.read("revenue")) == [("cy", 3, 2)]


def test_pandas_dataframe(db):
    frame = pd.DataFrame({"id": [1, 2, 3], "customer": ["a", "b", "a"], "amount": [1, 20, 3]})
    delta = db.ingest("orders", frame)
    assert rows(delta["revenue"]) == [("a", 4, 2, 1), ("b", 20, 1, 1)]
    assert rows(db.read("big")) == [(2, "b")]


def test_empty_list_is_a_no_op_with_empty_deltas(seeded):
    delta = seeded.ingest("orders", [])
    assert seeded.epoch == 1  # no rows: the epoch does not advance (issue #27)
    assert set(delta) == set(seeded.views) and all(d.num_rows == 0 for d in delta.values())
    delta = seeded.ingest("orders", [], epoch=2)  # unless epoch= asks for it
    assert seeded.epoch == 2 and all(d.num_rows == 0 for d in delta.values())
    assert rows(seeded.read("revenue")) == [("ann", 15, 2), ("bob", 7, 1)]


def test_weights_insert_copies_and_delete():
    db = ivm.connect()
    db.execute("""
        CREATE TABLE t (k VARCHAR, v BIGINT);
        CREATE VIEW s AS SELECT k, SUM(v) AS total, COUNT(*) AS n FROM t GROUP BY k;
        CREATE VIEW d AS SELECT DISTINCT k FROM t;
    """)
    delta = db.ingest("t", [{"k": "x", "v": 4, "__w": 2}, {"k": "y", "v": 1, "__w": 1}])
    assert rows(delta["s"]) == [("x", 8, 2, 1), ("y", 1, 1, 1)]
    assert rows(delta["d"]) == [("x", 1), ("y", 1)]
    assert rows(db.read("t")) == [("x", 4), ("x", 4), ("y", 1)]

    delta = db.ingest("t", [{"k": "x", "v": 4, "__w": -1}, {"k": "y", "v": 1, "__w": -1}])
    # x: group changes from (8, 2) to (4, 1); y: group disappears
    assert rows(delta["s"]) == [("x", 4, 1, 1), ("x", 8, 2, -1), ("y", 1, 1, -1)]
    assert rows(delta["d"]) == [("y", -1)]
    assert rows(db.read("t")) == [("x", 4)]
    assert rows(db.read("s")) == [("x", 4, 1)]
    assert rows(db.read("d")) == [("x",)]


def test_weights_with_zero_are_dropped(seeded):
    batch = pa.table(
        {
            "id": pa.array([9], pa.int64()),
            "customer": ["zed"],
            "amount": pa.array([1], pa.int64()),
            "__w": pa.array([0], pa.int64()),
        }
    )
    delta = seeded.ingest("orders", batch)
    assert all(d.num_rows == 0 for d in delta.values())
    assert rows(seeded.read("orders")) == [(1, "ann", 10), (2, "ann", 5), (3, "bob", 7)]


def debezium(op, before, after):
    return {"op": op, "before": before, "after": after}


def test_debezium_envelope(seeded):
    batch = pa.Table.from_pylist(
        [
            debezium("c", None, {"id": 4, "customer": "bob", "amount": 1}),
            debezium("r", None, {"id": 5, "customer": "dan", "amount": 50}),
            debezium(
                "u",
                {"id": 1, "customer": "ann", "amount": 10},
                {"id": 1, "customer": "ann", "amount": 2},
            ),
            debezium("d", {"id": 2, "customer": "ann", "amount": 5}, None),
        ]
    )
    delta = seeded.ingest("orders", batch)
    # ann: (15, 2) -> (2, 1); bob: (7, 1) -> (8, 2); dan: new (50, 1)
    assert rows(delta["revenue"]) == [
        ("ann", 2, 1, 1),
        ("ann", 15, 2, -1),
        ("bob", 7, 1, -1),
        ("bob", 8, 2, 1),
        ("dan", 50, 1, 1),
    ]
    assert rows(delta["big"]) == [(1, "ann", -1), (5, "dan", 1)]
    assert rows(seeded.read("orders")) == [
        (1, "ann", 2), (3, "bob", 7), (4, "bob", 1), (5, "dan", 50)
    ]
    assert rows(seeded.read("revenue")) == [("ann", 2, 1), ("bob", 8, 2), ("dan", 50, 1)]


def test_debezium_ignores_other_envelope_columns(db):
    batch = pa.Table.from_pylist(
        [
            {
                "op": "c",
                "before": None,
                "after": {"id": 1, "customer": "a", "amount": 11},
                "ts_ms": 123,
                "source": {"db": "x"},
            }
        ]
    )
    delta = db.ingest("orders", batch)
    assert rows(delta["big"]) == [(1, "a", 1)]


def test_delta_change_data_feed(seeded):
    batch = pa.Table.from_pylist(
        [
            {"id": 4, "customer": "cy", "amount": 12, "_change_type": "insert"},
            {"id": 3, "customer": "bob", "amount": 7, "_change_type": "delete"},
            {"id": 2, "customer": "ann", "amount": 5, "_change_type": "update_preimage"},
            {"id": 2, "customer": "ann", "amount": 25, "_change_type": "update_postimage"},
        ]
    ).append_column("_commit_version", pa.array([7, 7, 7, 7], pa.int64()))
    delta = seeded.ingest("orders", batch)
    # ann: (15, 2) -> (35, 2); bob: gone; cy: new (12, 1)
    assert rows(delta["revenue"]) == [
        ("ann", 15, 2, -1),
        ("ann", 35, 2, 1),
        ("bob", 7, 1, -1),
        ("cy", 12, 1, 1),
    ]
    assert rows(delta["big"]) == [(2, "ann", 1), (4, "cy", 1)]
    assert rows(seeded.read("orders")) == [(1, "ann", 10), (2, "ann", 25), (4, "cy", 12)]


def test_column_order_does_not_matter(db):
    batch = pa.table(
        {
            "amount": pa.array([40, 1], pa.int64()),
            "customer": ["x", "y"],
            "id": pa.array([8, 9], pa.int64()),
        }
    )
    delta = db.ingest("orders", batch)
    assert rows(delta["big"]) == [(8, "x", 1)]
    assert rows(db.read("orders")) == [(8, "x", 40), (9, "y", 1)]
    assert db.read("orders").column_names == ["id", "customer", "amount"]
    # also for list of dicts and with __w first
    db.ingest("orders", [{"__w": -1, "amount": 1, "id": 9, "customer": "y"}])
    assert rows(db.read("orders")) == [(8, "x", 40)]


def test_int32_casts_to_bigint_and_string_types_to_varchar(db):
    batch = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "customer": pa.array(["ann", "bob"], pa.large_string()),
            "amount": pa.array([10, 20], pa.int32()),
        }
    )
    delta = db.ingest("orders", batch)
    assert rows(delta["big"]) == [(1, "ann", 1), (2, "bob", 1)]
    batch = pa.table(
        {
            "id": pa.array([3], pa.int16()),
            "customer": pa.array(["cy"], pa.string_view()),
            "amount": pa.array([30], pa.uint8()),
        }
    )
    delta = db.ingest("orders", batch)
    assert rows(delta["big"]) == [(3, "cy", 1)]
    batch = pa.table(
        {
            "id": pa.array([4], pa.int64()),
            "customer": pa.array(["ann"]).dictionary_encode(),
            "amount": pa.array([1], pa.int64()),
        }
    )
    db.ingest("orders", batch)
    orders = db.read("orders")
    assert orders.schema.field("id").type == pa.int64()
    assert orders.schema.field("customer").type == pa.string()
    assert rows(orders) == [(1, "ann", 10), (2, "bob", 20), (3, "cy", 30), (4, "ann", 1)]
    assert rows(db.read("revenue")) == [("ann", 11, 2), ("bob", 20, 1), ("cy", 30, 1)]


def test_decimal_column_accepts_ints_and_decimals():
    db = ivm.connect()
    db.execute("""
        CREATE TABLE p (id INTEGER PRIMARY KEY, price DECIMAL(12,2));
        CREATE VIEW total AS SELECT SUM(price) AS s FROM p;
    """)
    db.ingest("p", [{"id": 1, "price": Decimal("1.25")}, {"id": 2, "price": Decimal("2.50")}])
    db.ingest("p", pa.table({"id": pa.array([3], pa.int8()), "price": pa.array([4], pa.int64())}))
    assert rows(db.read("total")) == [(Decimal("7.75"),)]


# -- upsert ------------------------------------------------------------------------------


def test_upsert_replaces_row_with_same_key(seeded):
    delta = seeded.ingest(
        "orders",
        [{"id": 1, "customer": "bob", "amount": 3}, {"id": 6, "customer": "eve", "amount": 60}],
        mode="upsert",
    )
    # order 1 moves from ann (amount 10) to bob (amount 3)
    assert rows(delta["revenue"]) == [
        ("ann", 5, 1, 1),
        ("ann", 15, 2, -1),
        ("bob", 7, 1, -1),
        ("bob", 10, 2, 1),
        ("eve", 60, 1, 1),
    ]
    assert rows(delta["big"]) == [(1, "ann", -1), (6, "eve", 1)]
    assert rows(seeded.read("orders")) == [
        (1, "bob", 3),
        (2, "ann", 5),
        (3, "bob", 7),
        (6, "eve", 60),
    ]


def test_upsert_of_identical_row_changes_nothing(seeded):
    delta = seeded.ingest("orders", [{"id": 3, "customer": "bob", "amount": 7}], mode="upsert")
    assert all(d.num_rows == 0 for d in delta.values())
    assert rows(seeded.read("orders")) == [(1, "ann", 10), (2, "ann", 5), (3, "bob", 7)]


def test_insert_of_existing_key_raises(seeded):
    with pytest.raises(ivm.ConstraintError):
        seeded.ingest("orders", [{"id": 1, "customer": "bob", "amount": 3}])
    assert seeded.epoch == 1
    assert rows(seeded.read("orders")) == [(1, "ann", 10), (2, "ann", 5), (3, "bob", 7)]


def test_delete_then_insert_same_key_in_one_batch(seeded):
    delta = seeded.ingest(
        "orders",
        [
            {"id": 1, "customer": "ann", "amount": 10, "__w": -1},
            {"id": 1, "customer": "ann", "amount": 40, "__w": 1},
        ],
    )
    assert rows(delta["revenue"]) == [("ann", 15, 2, -1), ("ann", 45, 2, 1)]
    assert delta["big"].num_rows == 0  # (1, ann) stays in the view
    assert rows(seeded.read("orders")) == [(1, "ann", 40), (2, "ann", 5), (3, "bob", 7)]


def test_insert_then_delete_in_one_batch_order_irrelevant(seeded):
    # the insert is listed before the delete; the batch is a set of changes
    delta = seeded.ingest(
        "orders",
        [
            {"id": 3, "customer": "bob", "amount": 70, "__w": 1},
            {"id": 3, "customer": "bob", "amount": 7, "__w": -1},
        ],
    )
    assert rows(delta["big"]) == [(3, "bob", 1)]
    assert rows(seeded.read("orders")) == [(1, "ann", 10), (2, "ann", 5), (3, "bob", 70)]


def test_unknown_mode_raises(seeded):
    with pytest.raises(ivm.IvmError):
        seeded.ingest("orders", [], mode="merge")


# -- deltas are consolidated Z-sets that add up to the view ------------------------------


def test_deltas_are_consolidated_and_sum_to_read():
    import random
    from collections import Counter

    db = ivm.connect()
    db.execute("""
        CREATE TABLE t (k VARCHAR, v BIGINT);
        CREATE VIEW proj AS SELECT k FROM t;
        CREATE VIEW agg AS SELECT k, SUM(v) AS s, COUNT(*) AS n, MIN(v) AS lo FROM t GROUP BY k;
        CREATE VIEW dist AS SELECT DISTINCT k FROM t;
        CREATE VIEW self_join AS SELECT a.k, b.v FROM t a JOIN t b ON a.k = b.k;
    """)
    rng = random.Random(5)
    live: Counter = Counter()
    totals = {view: Counter() for view in ("proj", "agg", "dist", "self_join")}
    for _ in range(25):
        batch = []
        for _ in range(rng.randint(1, 5)):
            row = (rng.choice("abc"), rng.randint(1, 3))
            weight = -rng.randint(1, live[row]) if live[row] and rng.random() < 0.4 else 2
            live[row] += weight
            batch.append({"k": row[0], "v": row[1], "__w": weight})
        # the same row twice in a batch is summed
        merged: Counter = Counter()
        for change in batch:
            merged[(change["k"], change["v"])] += change["__w"]
        batch = [{"k": k, "v": v, "__w": w} for (k, v), w in merged.items()]
        for view, delta in db.ingest("t", batch).items():
            assert delta.column_names[-1] == "__w"
            changes = [tuple(r.values()) for r in delta.to_pylist()]
            keys = [c[:-1] for c in changes]
            assert len(keys) == len(set(keys)), f"{view}: delta rows are not consolidated"
            assert all(c[-1] != 0 for c in changes)
            for *row, weight in changes:
                totals[view][tuple(row)] += weight
        for view, total in totals.items():
            assert +total == Counter(tuple(r.values()) for r in db.read(view).to_pylist())
            assert all(w > 0 for w in total.values() if w)
    assert Counter(tuple(r.values()) for r in db.read("t").to_pylist()) == +live


def test_weight_times_large_value_does_not_overflow_sum():
    db = ivm.connect()
    db.execute("CREATE TABLE t (a BIGINT); CREATE VIEW s AS SELECT SUM(a) AS s FROM t")
    # DuckDB's SUM(BIGINT) is a HUGEINT: 2 * 2**62 fits
    delta = db.ingest("t", [{"a": 2**62, "__w": 2}])
    assert rows(delta["s"]) == [(None, -1), (2**63, 1)]
    assert rows(db.read("s")) == [(2**63,)]
    assert db.sql("SELECT SUM(a) AS s FROM t").to_pylist() == [{"s": 2**63}]
