"""Bad batches (``db.ingest``) in every batch kind and change format."""

from __future__ import annotations

import datetime
from decimal import Decimal

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa

from bad_input.cases import Case, Fresh, event, ingest, order, pair
from ivm import ConstraintError, EpochError, ExecutionError, IvmError, SchemaError

E, C, X = SchemaError, ConstraintError, ExecutionError
HUGE = "9" * 1_000_000
"""An oversized string: a megabyte of digits."""


def doc(id_: int = 7, **changes: object) -> dict[str, object]:
    """A row of ``docs``."""
    return {"id": id_, "meta": {"src": "w", "n": 1}, **changes}


def events_arrow(**columns: pa.Array) -> pa.Table:
    """One row of ``events`` as Arrow, columns replaced."""
    data = {"k": pa.array([3], pa.int32()), "v": pa.array([1.0]), "s": pa.array(["1"])}
    data.update(columns)
    return pa.table(data)


def reader(*batches: pa.RecordBatch, schema: pa.Schema | None = None) -> Fresh:
    """A RecordBatchReader of ``batches`` (built at each run: a reader reads once)."""
    return Fresh(lambda: pa.RecordBatchReader.from_batches(schema or batches[0].schema,
                                                           list(batches)))


def pairs_batch(a: list, b: list, x: list, w: list | None = None) -> pa.RecordBatch:
    """A record batch of ``pairs`` rows (and weights)."""
    data = {"a": pa.array(a, pa.int64()), "b": pa.array(b), "x": pa.array(x, pa.int32())}
    if w is not None:
        data["__w"] = pa.array(w, pa.int64())
    return pa.record_batch(data)


def relation(sql: str) -> Fresh:
    """A DuckDB relation of ``sql`` (on a connection of its own)."""
    return Fresh(lambda: duckdb.connect().sql(sql))


WRONG_TYPES = [
    ingest("arrow-string-into-int", "events", events_arrow(k=pa.array(["x"])), E, "'events'",
           "'k'"),
    ingest("record-batch-float-into-bigint", "orders", pa.record_batch(
        {"id": [1.5], "customer": ["a"], "amount": [None], "qty": [None], "tags": [None],
         "day": [None]}), E, "'orders'", "'id'"),
    ingest("pandas-text-into-decimal", "orders", pd.DataFrame(
        {"id": [7], "customer": ["a"], "amount": ["ten"], "qty": [1], "tags": [None],
         "day": [None]}), E, "'orders'", "'amount'"),
    ingest("rows-bad-date", "orders", [order(7, day="not a day")], E, "'orders'", "'day'"),
    ingest("columns-bool-into-int", "events", {"k": [True], "v": [1.0], "s": ["1"]}, E, "'k'"),
    ingest("polars-text-key", "orders", pl.DataFrame(
        {"id": ["7"], "customer": ["a"], "amount": [1.0], "qty": [1], "tags": [["t"]],
         "day": [datetime.date(2026, 1, 1)]}), E, "'id'"),
    ingest("reader-int-into-varchar", "events", reader(pa.record_batch(
        {"k": pa.array([1], pa.int32()), "v": [1.0], "s": [5]})), E, "'events'", "'s'"),
    ingest("relation-text-into-double", "events", relation("SELECT 1 AS k, 'x' AS v, '1' AS s"),
           E, "'events'", "'v'"),
    ingest("rows-mixed-types-in-column", "events", [event(), event(k="a")], E, "'k'"),
    ingest("pandas-mixed-object-column", "events", pd.DataFrame(
        {"k": [1, "x"], "v": [1.0, 2.0], "s": ["1", "2"]}), E, "'events'", "k"),
    ingest("bytes-into-varchar", "events", [event(s=b"\xff")], E, "'s'"),
    ingest("list-into-scalar", "events", [event(v=[1.0])], E, "'v'"),
    ingest("struct-into-scalar", "events", [event(s={"a": 1})], E, "'s'"),
    ingest("timestamp-into-int", "events", [event(k=datetime.datetime(2026, 1, 1))], E, "'k'"),
]

LOSSY = [
    ingest("int-out-of-integer-range", "events", events_arrow(k=pa.array([2**40])), E, "'k'"),
    ingest("rows-int-out-of-integer-range", "orders", [order(7, qty=2**33)], E, "'qty'"),
    ingest("decimal-overflow", "orders", [order(7, amount=10**12)], E, "'amount'"),
    ingest("decimal-scale-lost", "orders", [order(7, amount=Decimal("1.234"))], E, "'amount'"),
    ingest("whole-float-into-bigint", "orders", pa.table(
        {"id": [7.0], "customer": ["a"], "amount": pa.array([None], pa.decimal128(12, 2)),
         "qty": pa.array([1], pa.int32()), "tags": pa.array([None], pa.list_(pa.string())),
         "day": pa.array([None], pa.date32())}), E, "'id'"),
    ingest("uint64-past-bigint", "pairs", pa.table(
        {"a": pa.array([2**63], pa.uint64()), "b": ["p"], "x": pa.array([1], pa.int32())}),
           E, "'pairs'", "'a'"),
    ingest("nan-into-bigint", "orders", pa.table(
        {"id": [float("nan")], "customer": ["a"], "amount": [1], "qty": [1], "tags": [None],
         "day": [None]}), E, "'id'"),
    ingest("pandas-nan-into-int", "events", pd.DataFrame(
        {"k": [1, None], "v": [1.0, 2.0], "s": ["1", "2"]}), E, "'k'"),
    ingest("timestamp-into-date", "orders", [order(7, day=datetime.datetime(2026, 1, 1, 12))],
           E, "'day'"),
    ingest("double-into-integer", "events", [event(k=1.5)], E, "'k'"),
]

NULL_AND_NAN_KEYS = [
    ingest("null-key-rows", "orders", [order(None)], C, "'orders'", "'id'"),
    ingest("null-key-arrow", "pairs", pa.table(
        {"a": pa.array([None], pa.int64()), "b": ["p"], "x": pa.array([1], pa.int32())}),
           C, "'pairs'", "'a'"),
    ingest("null-second-key-column", "pairs", [pair(9, None)], C, "'pairs'", "'b'"),
    ingest("null-not-null-column", "orders", [order(7, customer=None)], C, "'customer'"),
    ingest("null-key-debezium", "orders", [{"op": "c", "before": None, "after": order(None)}],
           C, "'orders'", "'id'"),
    ingest("null-key-delta-cdf", "orders", [{**order(None), "_change_type": "insert"}],
           C, "'orders'", "'id'"),
    ingest("null-key-upsert", "orders", [order(None)], C, "'id'", mode="upsert"),
    ingest("null-key-polars", "pairs", pl.DataFrame({"a": [None], "b": ["p"], "x": [1]},
                                                      schema={"a": pl.Int64, "b": pl.Utf8,
                                                              "x": pl.Int32}), C, "'a'"),
    ingest("two-nan-keys", "ratings", [{"r": float("nan"), "y": 1}, {"r": float("nan"), "y": 2}],
           C, "'ratings'", "nan"),
    ingest("nan-key-already-held", "ratings", [{"r": float("nan"), "y": 9}], C, "'ratings'", "nan"),
    ingest("minus-zero-key-held", "ratings", [{"r": -0.0, "y": 9}], C, "'ratings'", "'r'"),
]

DUPLICATE_KEYS = [
    ingest("duplicate-within-batch", "orders", [order(7), order(7, qty=3)], C, "'orders'", "7"),
    ingest("duplicate-of-held-row", "orders", [order(1, qty=9)], C, "'orders'", "'id': 1"),
    ingest("duplicate-composite-polars", "pairs", pl.DataFrame(
        {"a": [5, 5], "b": ["q", "q"], "x": [1, 2]}), C, "'pairs'", "'a': 5"),
    ingest("duplicate-across-reader-chunks", "pairs", reader(
        pairs_batch([20], ["q"], [1]), pairs_batch([20], ["q"], [2])), C, "'pairs'", "20"),
    ingest("weight-two-on-keyed-row", "orders", [{**order(7), "__w": 2}], C, "'orders'"),
    ingest("duplicate-debezium-creates", "orders", [
        {"op": "c", "before": None, "after": order(7)},
        {"op": "c", "before": None, "after": order(7, qty=5)}], C, "'orders'", "7"),
    ingest("duplicate-delta-inserts", "pairs", [pair(8, _change_type="insert"),
                                                pair(8, x=2, _change_type="insert")], C, "'pairs'"),
    ingest("duplicate-in-multi-table", {"events": [event(4)], "pairs": [pair(), ]}, None, C,
           "'pairs'"),
    ingest("duplicate-nan-key-dict-of-columns", "ratings",
           {"r": [float("nan")], "y": [4]}, C, "'ratings'"),
]

ABSENT_DELETES = [
    ingest("weighted-delete-absent-key", "orders", [{**order(77), "__w": -1}], C, "'orders'", "77"),
    ingest("weighted-delete-wrong-values", "orders", [{**order(1, qty=9), "__w": -1}], C,
           "'orders'", "'qty': 9"),
    ingest("weighted-delete-more-copies", "events", [event(__w=-3)], C, "'events'"),
    ingest("weighted-delete-absent-bag-row", "events", [event(9, __w=-1)], C, "'events'", "9"),
    ingest("debezium-delete-absent-row", "orders", [{"op": "d", "before": order(77),
                                                     "after": None}], C, "'orders'", "77"),
    ingest("debezium-key-only-delete-absent", "orders", [{"op": "d", "before": {"id": 77}}],
           C, "'orders'", "77"),
    ingest("debezium-update-absent-row", "orders", [
        {"op": "u", "before": order(77), "after": order(77, qty=3)}], C, "'orders'", "77"),
    ingest("delta-delete-absent", "events", [event(99, _change_type="delete")], C, "'events'",
           "99"),
    ingest("delta-preimage-absent", "events", [event(98, _change_type="update_preimage"),
                                               event(98, 2.0, _change_type="update_postimage")],
           C, "'events'", "98"),
    ingest("reader-delete-absent-in-second-chunk", "pairs", reader(
        pairs_batch([30], ["z"], [1], [1]), pairs_batch([31], ["z"], [1], [-1])), C, "'pairs'",
           "31"),
    ingest("delete-absent-in-multi-table", {"orders": [order(8)], "events": [event(55, __w=-1)]},
           None, C, "'events'", "55"),
    ingest("upsert-weighted-delete-absent", "orders", [{**order(77), "__w": -1}], C, "77",
           mode="upsert"),
    ingest("delete-composite-wrong-part", "pairs", [pair(1, "zz", __w=-1)], C, "'pairs'", "zz"),
]

OVERSIZED = [
    ingest("megabyte-string-into-int", "events", [event(k=HUGE)], E, "'events'", "'k'"),
    ingest("megabyte-string-fails-view-cast", "events", [event(4, s=HUGE)], X, "'coded'"),
    ingest("megabyte-column-name", "events", [{**event(), "c" * 100_000: 1}], E, "'events'"),
    ingest("megabyte-table-name", "t" * 100_000, [event()], E, "no table"),
    ingest("megabyte-string-into-decimal", "orders", [order(7, amount=HUGE)], E, "'amount'"),
]

NESTED = [
    ingest("list-of-ints-into-varchar-list", "orders", [order(7, tags=[1, 2])], E, "'tags'"),
    ingest("string-into-list", "orders", [order(7, tags="x")], E, "'tags'"),
    ingest("list-of-lists-into-list", "orders", [order(7, tags=[["x"]])], E, "'tags'"),
    ingest("struct-unknown-field", "docs", [doc(meta={"src": "w", "zz": 1})], E, "'meta'"),
    ingest("struct-field-wrong-type", "docs", [doc(meta={"src": "w", "n": "abc"})], E,
           "'docs'", "'meta'"),
    ingest("list-into-struct", "docs", [doc(meta=[1])], E, "'meta'"),
    ingest("scalar-into-struct", "docs", [doc(meta="w")], E, "'meta'"),
    ingest("struct-missing-field", "docs", [doc(meta={"src": "w"})], E, "'meta'"),
    ingest("struct-into-list", "orders", [order(7, tags={"a": "b"})], E, "'tags'"),
    ingest("debezium-nested-mismatch", "orders", [
        {"op": "c", "before": None, "after": order(7, tags=[1])}], E, "'orders'", "tags"),
    ingest("struct-field-lossy", "docs", [doc(meta={"src": "w", "n": 2**40})], E, "'meta'"),
    ingest("struct-duplicate-key", "docs", [doc(1)], C, "'docs'", "'id': 1"),
]

EMPTY_AND_ZERO_COLUMNS = [
    ingest("rows-without-columns", "events", [{}, {}], E, "'events'", "'k'"),
    ingest("pandas-rows-without-columns", "events", pd.DataFrame(index=[0, 1]), E, "'events'",
           "'k'"),
    ingest("arrow-rows-without-columns", "events", pa.table({"k": [1, 2]}).drop(["k"]), E,
           "'events'", "'k'"),
    ingest("zero-column-dict-with-rows", "events", [{}], E, "'events'"),
    ingest("empty-batch-unknown-column", "events", pa.table({"zz": pa.array([], pa.int64())}), E,
           "'zz'"),
]

FORMATS = [
    ingest("float-weights", "events", [event(__w=1.5)], E, "'events'", "'__w'"),
    ingest("null-weight", "events", [event(__w=1), event(__w=None)], E, "'events'", "row 1"),
    ingest("text-weights", "events", [event(__w="1")], E, "'__w'"),
    ingest("weight-past-int64", "events", pa.table(
        {"k": pa.array([1], pa.int32()), "v": [1.0], "s": ["7"],
         "__w": pa.array([2**64 - 1], pa.uint64())}), E, "'__w'"),
    ingest("weights-summing-past-int64", "events", [event(__w=2**62), event(__w=2**62)], E,
           "'events'", "'__w'"),
    ingest("delta-unknown-change-type", "events", [event(_change_type="upsert")], E, "'events'",
           "upsert"),
    ingest("delta-null-change-type", "events", [event(_change_type=None)], E, "_change_type"),
    ingest("debezium-unknown-op", "orders", [{"op": "x", "before": None, "after": order(7)}], E,
           "'orders'", "'x'"),
    ingest("debezium-null-op", "orders", [{"op": None, "before": None, "after": order(7)}], E,
           "'orders'", "NULL"),
    ingest("debezium-after-not-a-struct", "orders", [{"op": "c", "before": None, "after": 5}], E,
           "'orders'", "'after'"),
    ingest("debezium-after-missing-columns", "orders", [
        {"op": "c", "before": None, "after": {"id": 7}}], E, "'orders'", "'customer'"),
    ingest("debezium-without-op", "orders", [{"before": None, "after": order(7)}], E, "'after'"),
    ingest("mixed-change-formats", "events", [event(_change_type="insert", __w=1)], E,
           "'events'", "__w", "_change_type"),
    ingest("unknown-column", "events", [event(colour="red")], E, "'events'", "'colour'"),
    ingest("missing-column", "events", [{"k": 1, "v": 1.0}], E, "'events'", "'s'"),
    ingest("two-spellings-of-a-column", "events", pa.table(
        [pa.array([1]), pa.array([1]), pa.array([1.0]), pa.array(["1"])],
        names=["k", "K", "v", "s"]), E, "'k'", "'K'"),
    ingest("same-column-twice", "events", pa.table(
        [pa.array([1]), pa.array([1]), pa.array([1.0]), pa.array(["1"])],
        names=["k", "k", "v", "s"]), E, "'k'"),
    ingest("column-name-not-a-string", "events", {1: [1], "v": [1.0], "s": ["1"]}, E, "1"),
    ingest("rows-not-dicts", "events", [(1, 1.0, "1")], E, "'events'", "row 0"),
    ingest("rows-with-different-keys", "events", [event(), {"k": 1, "v": 1.0}], E, "row 1"),
    ingest("ragged-dict-of-columns", "events", {"k": [1, 2], "v": [1.0], "s": ["1", "2"]}, E,
           "'events'"),
    ingest("dict-of-scalars", "events", {"k": 1, "v": 1.0, "s": "1"}, E, "'events'"),
    ingest("not-a-batch-int", "events", 42, E, "'events'", "int"),
    ingest("not-a-batch-text", "events", "k,v,s\n1,1,1", E, "'events'", "str"),
    ingest("not-a-batch-none", "events", None, E, "'events'", "NoneType"),
    ingest("not-a-batch-set", "events", {1, 2}, E, "'events'", "set"),
    ingest("reader-batches-unlike-its-schema", "pairs", reader(
        pairs_batch([40], ["q"], [1]), schema=pa.schema(
            [("a", pa.int64()), ("b", pa.string()), ("x", pa.int64())])), E, "'pairs'"),
    ingest("column-name-with-nul", "events", [event(**{"a\x00b": 1})], E, "'events'"),
]

TARGETS = [
    ingest("into-a-view", "revenue", [{"customer": "z", "total": 1, "n": 1}], E, "'revenue'",
           "view"),
    ingest("into-unknown-table", "nope", [event()], E, "'nope'"),
    ingest("table-name-not-a-string", 5, [event()], IvmError, "5"),
    ingest("mapping-and-batch-both", {"events": [event()]}, [event()], IvmError, "mapping"),
    ingest("multi-table-unknown-table", {"events": [event(5)], "nope": [event()]}, None, E,
           "'nope'"),
    ingest("multi-table-into-a-view", {"events": [event(5)], "joined": [{"id": 1, "b": "p"}]}, None,
           E, "'joined'"),
    ingest("unknown-mode", "events", [event()], IvmError, "'merge'", mode="merge"),
    ingest("progress-not-bool", "events", [event()], IvmError, "progress=", "'yes'",
           progress="yes"),
    ingest("upsert-without-key", "events", [event()], E, "'events'", "PRIMARY KEY",
           mode="upsert"),
    ingest("sequence-without-upsert", "orders", [{**order(7), "lsn": 1}], E, "'orders'",
           "sequence", sequence="lsn"),
    ingest("sequence-names-no-column", "orders", [order(7)], E, "'orders'", "'lsn'",
           mode="upsert", sequence="lsn"),
    ingest("upsert-not-null-violated", "orders", [order(1, customer=None)], C, "'customer'",
           mode="upsert"),
]

EPOCHS = [
    ingest("epoch-gap", "events", [event()], EpochError, "epoch 1000000", epoch=1_000_000),
    ingest("epoch-zero", "events", [event()], EpochError, "0", epoch=0),
    ingest("epoch-negative", "events", [event()], EpochError, "-1", epoch=-1),
    ingest("epoch-text", "events", [event()], EpochError, "'2'", epoch="2"),
    ingest("epoch-bool", "events", [event()], EpochError, "True", epoch=True),
    ingest("epoch-float", "events", [event()], EpochError, "2.0", epoch=2.0),
]

CASES: list[Case] = [*WRONG_TYPES, *LOSSY, *NULL_AND_NAN_KEYS, *DUPLICATE_KEYS, *ABSENT_DELETES,
                     *OVERSIZED, *NESTED, *EMPTY_AND_ZERO_COLUMNS, *FORMATS, *TARGETS, *EPOCHS]
"""Every bad batch of the corpus."""
