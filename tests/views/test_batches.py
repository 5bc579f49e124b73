"""Tests of views.batches.normalize_batch: every batch format, casts and errors."""

from __future__ import annotations

import datetime
from collections import Counter
from decimal import Decimal

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.errors import ConstraintError, SchemaError
from ivm.schema import WEIGHT, Column, Schema, TableSchema
from ivm.views.batches import normalize_batch

ORDERS = TableSchema(
    "orders",
    Schema(
        (Column("id", "BIGINT"), Column("customer", "VARCHAR"), Column("amount", "DECIMAL(12,2)"))
    ),
    primary_key=("id",),
)


def duckdb_schema(table: TableSchema) -> pa.Schema:
    """The Arrow schema DuckDB gives for table's columns."""
    con = duckdb.connect()
    columns = ", ".join(f'"{c.name}" {c.type}' for c in table.schema.columns)
    con.execute(f'CREATE TABLE "{table.name}" ({columns})')
    return con.sql(f'SELECT * FROM "{table.name}" LIMIT 0').to_arrow_table().schema


ORDERS_ARROW = duckdb_schema(ORDERS)


def normalize(batch: object, table: TableSchema = ORDERS) -> pa.Table:
    """normalize_batch against the DuckDB schema of table."""
    return normalize_batch(
        batch, table, duckdb_schema(table) if table is not ORDERS else ORDERS_ARROW
    )


def rows(zset: pa.Table) -> list[tuple]:
    """The Z-set's rows as tuples, weight last, in order."""
    return [tuple(row.values()) for row in zset.to_pylist()]


def expected_schema(arrow_schema: pa.Schema = ORDERS_ARROW) -> pa.Schema:
    return arrow_schema.append(pa.field(WEIGHT, pa.int64()))


def orders_table(**overrides: pa.Array) -> pa.Table:
    """Two orders as an Arrow table; keyword arguments replace or add columns."""
    columns = {
        "id": pa.array([1, 2], pa.int64()),
        "customer": pa.array(["ann", "bob"]),
        "amount": pa.array([Decimal("10.50"), Decimal("3.00")], pa.decimal128(12, 2)),
    }
    columns.update(overrides)
    return pa.table(columns)


TWO_INSERTS = [(1, "ann", Decimal("10.50"), 1), (2, "bob", Decimal("3.00"), 1)]


# --- inserts in every container -----------------------------------------------------------


def test_arrow_table_is_inserted() -> None:
    zset = normalize(orders_table())
    assert zset.schema == expected_schema()
    assert rows(zset) == TWO_INSERTS


def test_record_batch_is_inserted() -> None:
    batch = orders_table().to_batches()[0]
    assert rows(normalize(batch)) == TWO_INSERTS


def test_pandas_frame_is_inserted() -> None:
    frame = pd.DataFrame(
        {"id": [1, 2], "customer": ["ann", "bob"], "amount": [Decimal("10.50"), Decimal("3")]}
    )
    zset = normalize(frame)
    assert zset.schema == expected_schema()
    assert rows(zset) == TWO_INSERTS


def test_list_of_dicts_is_inserted() -> None:
    batch = [
        {"id": 1, "customer": "ann", "amount": Decimal("10.50")},
        {"customer": "bob", "amount": 3, "id": 2},
    ]
    zset = normalize(batch)
    assert zset.schema == expected_schema()
    assert rows(zset) == TWO_INSERTS


def test_column_order_does_not_matter() -> None:
    batch = orders_table().select(["amount", "id", "customer"])
    assert rows(normalize(batch)) == TWO_INSERTS


def test_column_names_match_case_insensitively() -> None:
    batch = orders_table().rename_columns(["ID", "Customer", "amount"])
    zset = normalize(batch)
    assert zset.schema.names == ["id", "customer", "amount", WEIGHT]
    assert rows(zset) == TWO_INSERTS


def test_many_chunks() -> None:
    batch = pa.concat_tables([orders_table().slice(0, 1), orders_table().slice(1, 1)])
    assert batch.column("id").num_chunks == 2
    assert rows(normalize(batch)) == TWO_INSERTS


# --- empty batches ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "batch",
    [
        [],
        pa.table({}),
        orders_table().slice(0, 0),
        orders_table(**{WEIGHT: pa.array([1, 1])}).slice(0, 0),
        pd.DataFrame(columns=["id", "customer", "amount"]),
    ],
    ids=["list", "no-columns", "table", "weighted", "pandas"],
)
def test_empty_batch(batch: object) -> None:
    zset = normalize(batch)
    assert zset.num_rows == 0
    assert zset.schema == expected_schema()


def test_empty_debezium_batch() -> None:
    after = pa.struct([("id", pa.int64()), ("customer", pa.string()), ("amount", pa.int32())])
    batch = pa.table({"op": pa.array([], pa.string()), "after": pa.array([], after)})
    zset = normalize(batch)
    assert zset.num_rows == 0
    assert zset.schema == expected_schema()


# --- weights ------------------------------------------------------------------------------


def test_weights_and_zero_weights_dropped() -> None:
    batch = pa.table(
        {
            "id": [1, 2, 3],
            "customer": ["ann", "bob", "cy"],
            "amount": pa.array([1, 2, 3], pa.int32()),
            WEIGHT: pa.array([2, 0, -1], pa.int8()),
        }
    )
    assert rows(normalize(batch)) == [
        (1, "ann", Decimal("1.00"), 2),
        (3, "cy", Decimal("3.00"), -1),
    ]


def test_zero_weight_row_may_hold_null_key() -> None:
    batch = [
        {"id": None, "customer": "x", "amount": 1, WEIGHT: 0},
        {"id": 1, "customer": "y", "amount": 1, WEIGHT: 1},
    ]
    assert rows(normalize(batch)) == [(1, "y", Decimal("1.00"), 1)]


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (pa.array([1.0, 2.0]), "weights are integers"),
        (pa.array([True, False]), "weights are integers"),
        (pa.array(["1", "2"]), "weights are integers"),
        (pa.array([1, None]), "row 1 of the batch has a NULL weight"),
        (pa.array([1, 2**64 - 1], pa.uint64()), "does not fit int64"),
    ],
    ids=["float", "bool", "string", "null", "overflow"],
)
def test_bad_weights(weights: pa.Array, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        normalize(orders_table(**{WEIGHT: weights}))


# --- Debezium -----------------------------------------------------------------------------


def order(id_: int, customer: str | None, amount: str | None) -> dict:
    return {"id": id_, "customer": customer, "amount": None if amount is None else Decimal(amount)}


def test_debezium_ops() -> None:
    batch = [
        {"op": "c", "before": None, "after": order(1, "ann", "1"), "ts_ms": 10, "source": {}},
        {
            "op": "u",
            "before": order(1, "ann", "1"),
            "after": order(1, "ann", "2"),
            "ts_ms": 11,
            "source": {},
        },
        {"op": "d", "before": order(2, "bob", None), "after": None, "ts_ms": 12, "source": {}},
        {"op": "r", "before": None, "after": order(3, None, "5"), "ts_ms": 13, "source": {}},
    ]
    zset = normalize(batch)
    assert zset.schema == expected_schema()
    assert rows(zset) == [
        (1, "ann", Decimal("1.00"), 1),
        (1, "ann", Decimal("1.00"), -1),
        (1, "ann", Decimal("2.00"), 1),
        (2, "bob", None, -1),
        (3, None, Decimal("5.00"), 1),
    ]


def test_debezium_arrow_with_views_and_reordered_fields() -> None:
    after = pa.struct([("amount", pa.int32()), ("customer", pa.string_view()), ("ID", pa.int32())])
    before = pa.struct(
        [("id", pa.int64()), ("customer", pa.large_string()), ("amount", pa.decimal128(12, 2))]
    )
    batch = pa.table(
        {
            "op": pa.array(["d", "c"], pa.string_view()),
            "before": pa.array([{"id": 7, "customer": "x", "amount": Decimal("1")}, None], before),
            "after": pa.array([None, {"amount": 4, "customer": "y", "ID": 8}], after),
        }
    )
    assert rows(normalize(batch)) == [(7, "x", Decimal("1.00"), -1), (8, "y", Decimal("4.00"), 1)]


def test_debezium_inserts_without_before_column() -> None:
    batch = [{"op": "c", "after": order(1, "ann", "1")}]
    assert rows(normalize(batch)) == [(1, "ann", Decimal("1.00"), 1)]


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (
            [{"op": "c", "after": order(1, "a", "1")}, {"op": "x", "after": order(2, "b", "1")}],
            r"Debezium row 1 has unknown op 'x'",
        ),
        ([{"op": None, "after": order(1, "a", "1")}], r"Debezium row 0 has unknown op NULL"),
        (
            [{"op": "c", "after": order(1, "a", "1")}, {"op": "d", "after": None}],
            r"Debezium row 1 \(op 'd'\) has no 'before' row",
        ),
        (
            [
                {"op": "c", "before": None, "after": order(1, "a", "1")},
                {"op": "u", "before": None, "after": order(1, "a", "1")},
            ],
            r"Debezium row 1 \(op 'u'\) has no 'before' row",
        ),
        (
            [{"op": "c", "before": None, "after": None}],
            r"Debezium row 0 \(op 'c'\) has no 'after' row",
        ),
        (
            [{"op": "c", "after": {"id": 1, "customer": "a"}}],
            r"Debezium 'after' struct: batch has no column 'amount'",
        ),
        ([{"op": "c", "after": 5}], r"Debezium column 'after' has type int64"),
        ([{"op": 1, "after": order(1, "a", "1")}], r"column 'op' has type int64"),
    ],
    ids=[
        "unknown-op",
        "null-op",
        "no-before",
        "u-no-before",
        "no-after",
        "missing-field",
        "not-struct",
        "op-not-string",
    ],
)
def test_debezium_errors(batch: list[dict], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        normalize(batch)


def test_debezium_null_key_is_constraint_error() -> None:
    with pytest.raises(ConstraintError, match="'orders'.*'id'"):
        normalize([{"op": "c", "after": order(None, "a", "1")}])  # type: ignore[arg-type]


# --- Delta change data feed ---------------------------------------------------------------


def test_delta_change_types() -> None:
    batch = orders_table(
        id=pa.array([1, 1, 1, 2]),
        customer=pa.array(["a", "a", "b", "c"]),
        amount=pa.array([1, 1, 2, 3]),
        _change_type=pa.array(
            ["insert", "update_preimage", "update_postimage", "delete"]
        ).dictionary_encode(),
        _commit_version=pa.array([5, 6, 6, 7]),
        _commit_timestamp=pa.array([datetime.datetime(2024, 1, 1)] * 4),
    )
    assert rows(normalize(batch)) == [
        (1, "a", Decimal("1.00"), 1),
        (1, "a", Decimal("1.00"), -1),
        (1, "b", Decimal("2.00"), 1),
        (2, "c", Decimal("3.00"), -1),
    ]


@pytest.mark.parametrize(
    ("change_types", "message"),
    [
        (["insert", "upsert"], "row 1 of the batch has unknown _change_type 'upsert'"),
        (["insert", None], "row 1 of the batch has unknown _change_type NULL"),
    ],
)
def test_delta_bad_change_type(change_types: list, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        normalize(orders_table(_change_type=pa.array(change_types, pa.string())))


def test_delta_other_columns_are_not_ignored() -> None:
    with pytest.raises(SchemaError, match="'extra'"):
        normalize(orders_table(_change_type=pa.array(["insert"] * 2), extra=pa.array([1, 2])))


def test_mixed_formats_are_rejected() -> None:
    batch = orders_table(_change_type=pa.array(["insert"] * 2), **{WEIGHT: pa.array([1, 1])})
    with pytest.raises(SchemaError, match="mixes change formats"):
        normalize(batch)


def test_table_column_named_op_is_data() -> None:
    table = TableSchema("ops", Schema((Column("op", "VARCHAR"), Column("after", "INTEGER"))))
    zset = normalize([{"op": "c", "after": 1}], table)
    assert rows(zset) == [("c", 1, 1)]


# --- casts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column",
    [
        pa.array([1, 2], pa.int32()),
        pa.array([1, 2], pa.uint8()),
        pa.array([1, 2], pa.int64()).dictionary_encode(),
    ],
    ids=["int32", "uint8", "dictionary"],
)
def test_integer_casts(column: pa.Array) -> None:
    assert rows(normalize(orders_table(id=column))) == TWO_INSERTS


@pytest.mark.parametrize(
    "column",
    [
        pa.array(["ann", "bob"], pa.string_view()),
        pa.array(["ann", "bob"], pa.large_string()),
        pa.array(["ann", "bob"]).dictionary_encode(),
        pa.array(["ann", "bob"], pa.large_string()).dictionary_encode(),
    ],
    ids=["string_view", "large_string", "dictionary", "dictionary-large"],
)
def test_string_casts(column: pa.Array) -> None:
    zset = normalize(orders_table(customer=column))
    assert zset.schema == expected_schema()
    assert rows(zset) == TWO_INSERTS


def test_null_typed_column_becomes_nulls() -> None:
    zset = normalize(orders_table(customer=pa.nulls(2), amount=pa.nulls(2)))
    assert zset.schema == expected_schema()
    assert rows(zset) == [(1, None, None, 1), (2, None, None, 1)]


def test_integers_to_decimal_when_they_fit() -> None:
    zset = normalize(orders_table(amount=pa.array([10, 3], pa.int64())))
    assert [r[2] for r in rows(zset)] == [Decimal("10.00"), Decimal("3.00")]


def test_decimal_rescale_without_loss() -> None:
    amount = pa.array([Decimal("10.5"), Decimal("3")], pa.decimal128(5, 1))
    assert rows(normalize(orders_table(amount=amount))) == TWO_INSERTS


WIDE = TableSchema(
    "wide",
    Schema(
        (
            Column("k", "INTEGER"),
            Column("f", "DOUBLE"),
            Column("r", "REAL"),
            Column("ts", "TIMESTAMP"),
            Column("tz", "TIMESTAMPTZ"),
            Column("d", "DATE"),
            Column("h", "HUGEINT"),
            Column("l", "BIGINT[]"),
        )
    ),
)
WIDE_ARROW = duckdb_schema(WIDE)
MIDNIGHT = datetime.datetime(2024, 5, 1)


def wide(**overrides: pa.Array) -> pa.Table:
    """One row of the wide table; keyword arguments replace columns."""
    columns = {
        "k": pa.array([1], pa.int32()),
        "f": pa.array([1.5]),
        "r": pa.array([1.5], pa.float32()),
        "ts": pa.array([MIDNIGHT], pa.timestamp("us")),
        "tz": pa.array([MIDNIGHT], pa.timestamp("us", tz="UTC")),
        "d": pa.array([MIDNIGHT.date()]),
        "h": pa.array([1]),
        "l": pa.array([[1, 2]], pa.list_(pa.int64())),
    }
    columns.update(overrides)
    return pa.table(columns)


@pytest.mark.parametrize(
    ("column", "values", "expected"),
    [
        ("k", pa.array([5], pa.int64()), 5),
        ("f", pa.array([1.5], pa.float32()), 1.5),
        ("f", pa.array([2**53], pa.int64()), float(2**53)),
        ("r", pa.array([0.5]), 0.5),
        ("ts", pa.array([MIDNIGHT.date()]), MIDNIGHT),
        ("ts", pa.array([MIDNIGHT], pa.timestamp("ns")), MIDNIGHT),
        ("ts", pa.array([MIDNIGHT], pa.timestamp("s")), MIDNIGHT),
        ("d", pa.array([MIDNIGHT], pa.date64()), MIDNIGHT.date()),
        ("h", pa.array([2**63 - 1]), 2**63 - 1),
        ("l", pa.array([[1, 2]], pa.list_(pa.int32())), [1, 2]),
        ("l", pa.array([[1, 2]], pa.large_list(pa.int16())), [1, 2]),
    ],
    ids=[
        "int64-to-int32",
        "float32-to-double",
        "int-to-double",
        "double-to-real",
        "date-to-timestamp",
        "ns-to-us",
        "s-to-us",
        "date64",
        "int-to-hugeint",
        "list-int32",
        "large-list",
    ],
)
def test_lossless_casts(column: str, values: pa.Array, expected: object) -> None:
    zset = normalize_batch(wide(**{column: values}), WIDE, WIDE_ARROW)
    assert zset.schema == expected_schema(WIDE_ARROW)
    assert zset.column(column).to_pylist()[0] == expected


def test_zoned_timestamps_keep_the_instant() -> None:
    eastern = pc.cast(
        pa.array([MIDNIGHT], pa.timestamp("us", tz="UTC")),
        pa.timestamp("ns", tz="America/New_York"),
    )
    zset = normalize_batch(wide(tz=eastern), WIDE, WIDE_ARROW)
    assert (
        zset.column("tz").to_pylist()[0].timestamp()
        == MIDNIGHT.replace(tzinfo=datetime.UTC).timestamp()
    )


@pytest.mark.parametrize(
    ("column", "values", "batch_type", "declared"),
    [
        ("k", pa.array(["1"]), "string", "INTEGER"),
        ("k", pa.array([1.0]), "double", "INTEGER"),
        ("k", pa.array([2**40]), "int64", "INTEGER"),
        ("k", pa.array([True]), "bool", "INTEGER"),
        ("f", pa.array([2**53 + 1]), "int64", "DOUBLE"),
        ("f", pa.array(["1.5"]), "string", "DOUBLE"),
        ("r", pa.array([1e300]), "double", "REAL"),
        ("d", pa.array([MIDNIGHT]), r"timestamp\[us\]", "DATE"),
        ("d", pa.array(["2024-05-01"]), "string", "DATE"),
        ("ts", pa.array([MIDNIGHT], pa.timestamp("us", tz="UTC")), "timestamp", "TIMESTAMP"),
        ("tz", pa.array([MIDNIGHT], pa.timestamp("us")), r"timestamp\[us\]", "TIMESTAMPTZ"),
        ("tz", pa.array([MIDNIGHT.date()]), "date32", "TIMESTAMPTZ"),
        ("ts", pa.array([1], pa.timestamp("ns")), r"timestamp\[ns\]", "TIMESTAMP"),
        ("l", pa.array([["1"]]), "list<item: string>", r"BIGINT\[\]"),
        ("h", pa.array([1.0]), "double", "HUGEINT"),
    ],
    ids=[
        "string-int",
        "float-int",
        "int-overflow",
        "bool-int",
        "int-double-inexact",
        "string-double",
        "real-overflow",
        "timestamp-date",
        "string-date",
        "zoned-to-naive",
        "naive-to-zoned",
        "date-to-zoned",
        "ns-truncated",
        "list-of-strings",
        "float-hugeint",
    ],
)
def test_lossy_casts_are_rejected(
    column: str, values: pa.Array, batch_type: str, declared: str
) -> None:
    with pytest.raises(SchemaError, match=rf"'wide'.*'{column}'.*{batch_type}.*{declared}"):
        normalize_batch(wide(**{column: values}), WIDE, WIDE_ARROW)


@pytest.mark.parametrize(
    ("values", "batch_type"),
    [
        (pa.array([1.5, 2.0]), "double"),
        (pa.array([Decimal("1.005"), Decimal("1")]), r"decimal128\(4, 3\)"),
        (pa.array([10**11, 1]), "int64"),
        (pa.array(["1", "2"]), "string"),
    ],
    ids=["float", "rescale", "precision", "string"],
)
def test_lossy_decimal_is_rejected(values: pa.Array, batch_type: str) -> None:
    pattern = rf"'orders'.*'amount'.*{batch_type}.*DECIMAL\(12,2\).*decimal128\(12, 2\)"
    with pytest.raises(SchemaError, match=pattern):
        normalize(orders_table(amount=values))


def test_number_to_string_is_rejected() -> None:
    with pytest.raises(SchemaError, match="'customer'.*int64.*VARCHAR"):
        normalize(orders_table(customer=pa.array([1, 2])))


def test_string_view_output_schema() -> None:
    arrow_schema = pa.schema(
        [("id", pa.int64()), ("customer", pa.string_view()), ("amount", pa.decimal128(12, 2))]
    )
    batch = orders_table(
        customer=pa.array(["ann", "bob"], pa.string_view()), **{WEIGHT: pa.array([1, 0])}
    )
    zset = normalize_batch(batch, ORDERS, arrow_schema)
    assert zset.schema == expected_schema(arrow_schema)
    assert rows(zset) == TWO_INSERTS[:1]


# --- schema and constraint errors ---------------------------------------------------------


def test_missing_column() -> None:
    with pytest.raises(SchemaError, match=r"'orders'.*no column 'amount' \(DECIMAL\(12,2\)\)"):
        normalize(orders_table().drop_columns(["amount"]))


def test_unknown_column() -> None:
    with pytest.raises(SchemaError, match=r"'orders'.*'discount' \(double\).*not a column"):
        normalize(orders_table(discount=pa.array([0.1, 0.2])))


def test_two_columns_for_one_name() -> None:
    with pytest.raises(SchemaError, match="'ID' and 'id'|'id' and 'ID'"):
        normalize(orders_table(ID=pa.array([1, 2])))


def test_dict_rows_must_share_keys() -> None:
    batch = [
        {"id": 1, "customer": "a", "amount": 1},
        {"id": 2, "customer": "b"},
    ]
    with pytest.raises(SchemaError, match=r"'orders'.*row 1.*missing \['amount'\]"):
        normalize(batch)
    batch[1] = {"id": 2, "customer": "b", "amount": 1, "extra": 0}
    with pytest.raises(SchemaError, match=r"row 1.*extra \['extra'\]"):
        normalize(batch)


def test_dict_rows_with_mixed_types() -> None:
    with pytest.raises(SchemaError, match="'orders'.*'id'"):
        normalize(
            [{"id": 1, "customer": "a", "amount": 1}, {"id": "x", "customer": "b", "amount": 1}]
        )


def test_not_a_batch() -> None:
    with pytest.raises(SchemaError, match="cannot read a batch from int"):
        normalize(42)
    with pytest.raises(SchemaError, match="row 0 of the batch is a int"):
        normalize([1, 2])


def test_null_primary_key() -> None:
    with pytest.raises(ConstraintError, match="'orders'.*'id'.*primary key"):
        normalize(orders_table(id=pa.array([1, None])))


def test_null_in_not_null_column() -> None:
    table = TableSchema(
        "orders", ORDERS.schema, primary_key=("id",), not_null=frozenset({"customer"})
    )
    with pytest.raises(ConstraintError, match="'orders'.*'customer'.*NOT NULL"):
        normalize_batch(orders_table(customer=pa.array(["a", None])), table, ORDERS_ARROW)


def test_null_in_nullable_column_is_fine() -> None:
    zset = normalize(orders_table(amount=pa.array([None, 1])))
    assert zset.column("amount").null_count == 1


# --- properties ---------------------------------------------------------------------------

CHANGES = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from(["a", "b"]), st.integers(-3, 3)), max_size=20
)


@settings(max_examples=50, deadline=None)
@given(CHANGES)
def test_formats_agree(changes: list[tuple[int, str, int]]) -> None:
    """A weighted batch, its Delta feed and its Debezium envelope give the same Z-set."""
    weighted = [{"id": i, "customer": c, "amount": i, WEIGHT: w} for i, c, w in changes]
    unit = [(i, c, 1 if w > 0 else -1) for i, c, w in changes for _ in range(abs(w))]
    delta = [
        {"id": i, "customer": c, "amount": i, "_change_type": "insert" if w > 0 else "delete"}
        for i, c, w in unit
    ]
    debezium = [
        {"op": "c", "before": None, "after": {"id": i, "customer": c, "amount": i}}
        if w > 0
        else {"op": "d", "before": {"id": i, "customer": c, "amount": i}, "after": None}
        for i, c, w in unit
    ]

    def expand(zset: pa.Table) -> Counter:
        return Counter(
            (row[:-1], 1 if row[-1] > 0 else -1) for row in rows(zset) for _ in range(abs(row[-1]))
        )

    expected = expand(normalize(weighted))
    assert all(w != 0 for *_, w in rows(normalize(weighted)))
    assert expand(normalize(delta)) == expected
    assert expand(normalize(debezium)) == expected
