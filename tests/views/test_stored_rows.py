"""A delete retracts exactly what the stored row produced (issue #22, defect 4).

DuckDB calls ``-0.0`` and ``0.0`` equal, every NaN equal to every other, and
``INTERVAL '30 days'`` equal to ``INTERVAL '1 month'``; views evaluate each
differently (``CAST(d AS VARCHAR)``, ``1/d``, ``ts + i``). A batch deleting a
value equal to the stored one but not identical to it must take out the stored
row and retract what that row produced: the table empties, and so does the view.
In every batch format, with and without a primary key, through ``upsert``'s
implicit delete, in embedded and Spark mode.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from oracle.spark import SPARK_PARTITIONS

import ivm

ZERO_VIEW = "SELECT k, CAST(d AS VARCHAR) AS s, 1/d AS r FROM t"


def nan_with(bits: int) -> float:
    """A float NaN with exactly these bits."""
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def bits(column: pa.ChunkedArray) -> list[int]:
    return [int(b) for b in column.to_numpy().view(np.uint64)]


def weighted(k: list[int], d: list[float], w: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(k, pa.int64()), "d": pa.array(d, pa.float64()),
                     "__w": pa.array(w, pa.int64())})


@pytest.mark.parametrize("key", ["PRIMARY KEY", ""])
def test_a_delete_of_negative_zero_retracts_the_stored_zero(key: str) -> None:
    """The issue's second case: the table holds 0.0, the batch deletes -0.0."""
    with ivm.connect() as db:
        db.execute(f"CREATE TABLE t (k BIGINT {key}, d DOUBLE); CREATE VIEW v AS {ZERO_VIEW}")
        db.ingest("t", [{"k": 1, "d": 0.0}])
        delta = db.ingest("t", weighted([1], [-0.0], [-1]))["v"]
        assert delta.to_pylist() == [{"k": 1, "s": "0.0", "r": float("inf"), "__w": -1}]
        assert db.read("t").num_rows == 0
        assert db.read("v").num_rows == 0


@pytest.mark.parametrize("fmt", ["debezium", "delta", "rows", "upsert"])
def test_every_batch_format_resolves_its_deletes(fmt: str) -> None:
    """Debezium's before image, a Delta CDF preimage, a list of dicts with __w, and the
    row an upsert replaces: each takes out the stored row, -0.0 for 0.0."""
    with ivm.connect() as db:
        db.execute(f"CREATE TABLE t (k BIGINT PRIMARY KEY, d DOUBLE); CREATE VIEW v AS {ZERO_VIEW}")
        db.ingest("t", [{"k": 1, "d": -0.0}, {"k": 2, "d": 5.0}])
        struct_type = pa.struct([("k", pa.int64()), ("d", pa.float64())])
        if fmt == "debezium":
            batch: Any = pa.table({
                "op": ["u", "d"],
                "before": pa.array([{"k": 1, "d": 0.0}, {"k": 2, "d": 5.0}], struct_type),
                "after": pa.array([{"k": 1, "d": 3.0}, None], struct_type),
            })
            delta = db.ingest("t", batch)["v"]
        elif fmt == "delta":
            batch = pa.table({"k": [1, 1, 2], "d": [0.0, 3.0, 5.0],
                              "_change_type": ["update_preimage", "update_postimage", "delete"]})
            delta = db.ingest("t", batch)["v"]
        elif fmt == "rows":
            batch = [{"k": 1, "d": 0.0, "__w": -1}, {"k": 1, "d": 3.0, "__w": 1},
                     {"k": 2, "d": 5.0, "__w": -1}]
            delta = db.ingest("t", batch)["v"]
        else:
            delta = db.ingest("t", [{"k": 1, "d": 3.0}], mode="upsert")["v"]
            delta = pa.concat_tables([delta, db.ingest("t", weighted([2], [5.0], [-1]))["v"]])
        retracted = sorted((r["k"], r["s"], r["r"]) for r in delta.to_pylist() if r["__w"] < 0)
        assert retracted == [(1, "-0.0", float("-inf")), (2, "5.0", 0.2)]
        assert db.read("v").to_pylist() == [{"k": 1, "s": "3.0", "r": 1 / 3}]


def test_an_upsert_of_an_equal_value_replaces_the_stored_one() -> None:
    """Upserting -0.0 over 0.0 is a change of the row (its views see it), not a no-op."""
    with ivm.connect() as db:
        db.execute(f"CREATE TABLE t (k BIGINT PRIMARY KEY, d DOUBLE); CREATE VIEW v AS {ZERO_VIEW}")
        db.ingest("t", [{"k": 1, "d": 0.0}])
        delta = db.ingest("t", [{"k": 1, "d": -0.0}], mode="upsert")["v"]
        assert sorted((r["s"], r["__w"]) for r in delta.to_pylist()) == [("-0.0", 1), ("0.0", -1)]
        assert db.read("v").to_pylist() == [{"k": 1, "s": "-0.0", "r": float("-inf")}]
        # …and so is an update in one batch (delete 0.0, insert -0.0): it is not cancelled out.
        delta = db.ingest("t", weighted([1, 1], [-0.0, 0.0], [-1, 1]))["v"]
        assert sorted((r["s"], r["__w"]) for r in delta.to_pylist()) == [("-0.0", -1), ("0.0", 1)]


def test_nan_payloads_and_signs_are_the_stored_ones() -> None:
    """The stored NaN's bits come back in the retraction, whatever NaN the delete sent."""
    stored = [nan_with(0x7FF8000000000123), nan_with(0xFFF8000000000000)]
    with ivm.connect() as db:
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, d DOUBLE); "
                   "CREATE VIEW v AS SELECT k, d, signbit(d) AS negative FROM t")
        db.ingest("t", weighted([1, 2], stored, [1, 1]))
        delta = db.ingest("t", weighted([1, 2], [float("nan"), float("nan")], [-1, -1]))["v"]
        delta = delta.sort_by("k")
        assert bits(delta.column("d")) == [0x7FF8000000000123, 0xFFF8000000000000]
        assert delta.column("negative").to_pylist() == [False, True]
        assert db.read("v").num_rows == 0


def test_an_interval_in_other_units_deletes_the_stored_one() -> None:
    """INTERVAL '30 days' = INTERVAL '1 month' in DuckDB; Jan 31 + each is another day."""
    with ivm.connect() as db:
        db.execute("CREATE TABLE t (k INTEGER, i INTERVAL); CREATE VIEW v AS "
                   "SELECT k, CAST(i AS VARCHAR) AS s, DATE '2024-01-31' + i AS e FROM t")
        db.ingest("t", db.sql("SELECT 1 AS k, INTERVAL 1 MONTH AS i"))
        delta = db.ingest("t", db.sql("SELECT 1 AS k, INTERVAL 30 DAY AS i, -1 AS __w"))["v"]
        assert [(r["s"], str(r["e"])) for r in delta.to_pylist()] == [
            ("1 month", "2024-02-29 00:00:00")
        ]
        assert db.read("v").num_rows == 0


def test_a_list_holding_negative_zero_deletes_the_stored_list() -> None:
    with ivm.connect() as db:
        db.execute("CREATE TABLE t (k BIGINT, l DOUBLE[]); "
                   "CREATE VIEW v AS SELECT k, CAST(l AS VARCHAR) AS s FROM t")
        db.ingest("t", pa.table({"k": [1], "l": [[0.0, 1.0]]}))
        delta = db.ingest("t", pa.table({"k": [1], "l": [[-0.0, 1.0]], "__w": [-1]}))["v"]
        assert delta.to_pylist() == [{"k": 1, "s": "[0.0, 1.0]", "__w": -1}]
        assert db.read("v").num_rows == 0


def test_a_table_without_a_key_deletes_the_identical_copies_first() -> None:
    """Without a key a table may hold 0.0 and -0.0 in otherwise equal rows: a delete takes
    the copies identical to the value it sends, then (if it needs more) the others."""
    with ivm.connect() as db:
        db.execute("CREATE TABLE t (k BIGINT, d DOUBLE); CREATE VIEW v AS "
                   "SELECT k, CAST(d AS VARCHAR) AS s FROM t")
        db.ingest("t", weighted([1, 1], [0.0, -0.0], [2, 1]))
        contents = sorted(r["s"] for r in db.read("v").to_pylist())
        assert contents == ["-0.0", "0.0", "0.0"]  # kept apart when they arrive together
        delta = db.ingest("t", weighted([1], [-0.0], [-1]))["v"]
        assert delta.to_pylist() == [{"k": 1, "s": "-0.0", "__w": -1}]
        delta = db.ingest("t", weighted([1, 1], [0.0, -0.0], [-1, -1]))["v"]
        assert delta.to_pylist() == [{"k": 1, "s": "0.0", "__w": -2}]  # the second takes 0.0
        assert db.read("v").num_rows == 0
        with pytest.raises(ivm.ConstraintError, match="deletes a row that is not there"):
            db.ingest("t", weighted([1], [-0.0], [-1]))


def test_the_row_index_follows_a_resolved_change(tmp_path: Path) -> None:
    """After an epoch resolved in SQL the table's row index is brought up to date, not
    dropped: the next epochs are checked by it (and still right), and so after a reopen."""
    with ivm.connect(tmp_path) as db:
        db.execute(f"CREATE TABLE t (k BIGINT PRIMARY KEY, d DOUBLE); CREATE VIEW v AS {ZERO_VIEW}")
        db.ingest("t", weighted([1, 2, 3], [0.0, 0.0, 1.0], [1, 1, 1]))
        index = db._row_indexes["t"]
        db.ingest("t", weighted([1], [-0.0], [-1]))
        assert db._row_indexes["t"] is index and len(index) == 2
        with pytest.raises(ivm.ConstraintError, match="not there"):
            db.ingest("t", weighted([1], [0.0], [-1]))
        with pytest.raises(ivm.ConstraintError, match="duplicate primary key"):
            db.ingest("t", weighted([2], [-0.0], [1]))
        db.ingest("t", weighted([2, 2], [0.0, -0.0], [-1, 1]))
    with ivm.connect(tmp_path) as db:
        delta = db.ingest("t", weighted([2], [0.0], [-1]))["v"]
        assert delta.to_pylist() == [{"k": 2, "s": "-0.0", "r": float("-inf"), "__w": -1}]
        assert db.read("v").to_pylist() == [{"k": 3, "s": "1.0", "r": 1.0}]


def test_spark_mode_resolves_deletes_to_the_stored_rows(spark: Any, tmp_path: Path) -> None:
    """Spark mode: the table stage resolves deletes against its partition's rows, with and
    without a key, a Spark DataFrame batch too."""
    with ivm.connect(tmp_path, spark=spark, partitions=SPARK_PARTITIONS) as db:
        db.execute(f"CREATE TABLE t (k BIGINT PRIMARY KEY, d DOUBLE); CREATE VIEW v AS {ZERO_VIEW};"
                   "CREATE TABLE u (k BIGINT, d DOUBLE); "
                   "CREATE VIEW w AS SELECT k, CAST(d AS VARCHAR) AS s, 1/d AS r FROM u")
        nans = [float("nan"), nan_with(0x7FF8000000000123)]
        db.ingest({"t": weighted([1, 2, 3], [0.0, -0.0, nans[0]], [1, 1, 1]),
                   "u": weighted([1, 2, 3], [0.0, -0.0, nans[0]], [1, 1, 1])})
        batch = weighted([1, 2, 3], [-0.0, 0.0, nans[1]], [-1, -1, -1])
        deltas = db.ingest({"t": batch, "u": spark.createDataFrame(batch)})
        for view in ("v", "w"):
            assert sorted((r["k"], r["s"], r["__w"]) for r in deltas[view].to_pylist()) == [
                (1, "0.0", -1), (2, "-0.0", -1), (3, "nan", -1)
            ]
            assert db.read(view).num_rows == 0
        db.ingest("t", [{"k": 1, "d": 0.0}])
        delta = db.ingest("t", [{"k": 1, "d": -0.0}], mode="upsert")["v"]
        assert sorted((r["s"], r["__w"]) for r in delta.to_pylist()) == [("-0.0", 1), ("0.0", -1)]
