"""Exactly-once from outside (issue #27, item 4): ``ingest(..., epoch=N)``.

N must be the next epoch; an N already applied is a no-op returning the stored deltas;
a gap is an error. Empty batches are no-ops unless ``epoch=`` asks for one.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ivm

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
    CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
"""


def make(path: Path | None = None, spark: Any = None) -> Any:
    db = ivm.connect(path, spark=spark, partitions=2 if spark else None)
    if not db.tables:
        db.execute(DDL)
    return db


def rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def test_the_next_epoch_applies_and_a_repeat_returns_its_deltas() -> None:
    db = make()
    first = db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}], epoch=1)
    second = db.ingest("orders", [{"id": 2, "customer": "a", "amount": 7}], epoch=2)
    assert db.epoch == 2 and rows(db.read("revenue")) == [("a", 12)]
    again = db.ingest("orders", [{"id": 2, "customer": "a", "amount": 7}], epoch=2)
    assert db.epoch == 2 and rows(db.read("revenue")) == [("a", 12)]
    assert rows(again["revenue"]) == rows(second["revenue"]) == [("a", 5, -1), ("a", 12, 1)]
    # A repeat need not carry the same rows: it is not applied at all.
    assert rows(db.ingest("orders", [], epoch=1)["revenue"]) == rows(first["revenue"])


def test_a_gap_is_an_error_and_changes_nothing() -> None:
    db = make()
    db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}], epoch=1)
    with pytest.raises(ivm.EpochError, match="epochs 2..2 were never applied"):
        db.ingest("orders", [{"id": 2, "customer": "a", "amount": 7}], epoch=3)
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ivm.EpochError, match="positive integer"):
            db.ingest("orders", [{"id": 2, "customer": "a", "amount": 7}], epoch=bad)
    assert db.epoch == 1 and rows(db.read("revenue")) == [("a", 5)]


def test_empty_batches_are_no_ops_unless_an_epoch_is_asked_for() -> None:
    db = make()
    delta = db.ingest({"orders": []})
    assert db.epoch == 0 and delta["revenue"].num_rows == 0
    empty = pa.table({"id": pa.array([], pa.int64()), "customer": pa.array([], pa.string()),
                      "amount": pa.array([], pa.int64())})
    assert db.ingest("orders", empty).keys() == {"revenue"}
    assert db.epoch == 0
    db.ingest("orders", [], epoch=1)
    assert db.epoch == 1


def test_a_mapping_and_a_batch_together_are_refused() -> None:
    db = make()
    with pytest.raises(ivm.IvmError, match="not both"):
        db.ingest({"orders": []}, [{"id": 1, "customer": "a", "amount": 5}])


def test_a_repeat_after_reopening_is_a_no_op(tmp_path: Path) -> None:
    db = make(tmp_path / "state")
    db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}], epoch=1)
    db.close()
    db = make(tmp_path / "state")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}], epoch=1) == {}
    assert any("no longer kept" in str(w.message) for w in caught)
    assert db.epoch == 1 and rows(db.read("revenue")) == [("a", 5)]
    db.close()


def test_only_the_last_epochs_deltas_are_kept() -> None:
    db = make()
    for epoch in range(1, 12):
        db.ingest("orders", [{"id": epoch, "customer": "a", "amount": 1}], epoch=epoch)
    assert rows(db.ingest("orders", [], epoch=11)["revenue"]) == [("a", 10, -1), ("a", 11, 1)]
    with pytest.warns(ivm.IvmWarning, match="no longer kept"):
        assert db.ingest("orders", [], epoch=1) == {}


def test_epochs_on_spark(spark: Any, tmp_path: Path) -> None:
    db = make(tmp_path / "state", spark)
    try:
        db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}], epoch=1)
        again = db.ingest("orders", [{"id": 1, "customer": "a", "amount": 5}], epoch=1)
        assert rows(again["revenue"]) == [("a", 5, 1)]
        with pytest.raises(ivm.EpochError):
            db.ingest("orders", [{"id": 2, "customer": "a", "amount": 7}], epoch=4)
        assert db.ingest("orders", []) and db.epoch == 1
        db.ingest("orders", [], epoch=2)
        assert db.epoch == 2 and rows(db.read("revenue")) == [("a", 5)]
    finally:
        db.close()
