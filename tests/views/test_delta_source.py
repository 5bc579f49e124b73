"""Delta Lake sources (issue #27, item 6): a Delta table's change data feed as batches, and
followed into a session exactly once, in both modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ivm
from ivm.sources import delta_changes, follow_delta

deltalake = pytest.importorskip("deltalake")

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
    CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
"""


def rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def orders(ids: list[int], customer: str, amount: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "customer": [customer] * len(ids),
                     "amount": pa.array([amount] * len(ids), pa.int64())})


def write_versions(path: Path) -> None:
    """Versions 0..3: a first write, an append, an update, a delete."""
    deltalake.write_deltalake(str(path), orders([1, 2], "ada", 5),
                              configuration={"delta.enableChangeDataFeed": "true"})
    deltalake.write_deltalake(str(path), orders([3], "bob", 7), mode="append")
    table = deltalake.DeltaTable(str(path))
    table.update(predicate="id = 1", updates={"amount": "9"})
    table.delete("id = 2")


def delta_rows(path: Path) -> list[tuple]:
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return rows(table.select(["id", "customer", "amount"]))


def test_delta_changes_yields_each_version(tmp_path: Path) -> None:
    write_versions(tmp_path / "d")
    versions = list(delta_changes(tmp_path / "d", since_version=1))
    assert [v for v, _ in versions] == [1, 2, 3]
    assert sorted(versions[1][1].column("_change_type").to_pylist()) == [
        "update_postimage", "update_preimage"]
    with pytest.raises(ivm.IvmError, match="no Delta table"):
        list(delta_changes(tmp_path / "nowhere"))


@pytest.mark.parametrize("mode", ["embedded", "spark"])
def test_follow_delta_applies_each_version_once(mode: str, spark: Any, tmp_path: Path) -> None:
    options = {"spark": spark, "partitions": 2} if mode == "spark" else {}
    path = tmp_path / "d"
    deltalake.write_deltalake(str(path), orders([1, 2], "ada", 5),
                              configuration={"delta.enableChangeDataFeed": "true"})
    db = ivm.connect(tmp_path / "s", **options)
    try:
        db.execute(DDL)
        assert follow_delta(db, "orders", path) == [0]
        deltalake.write_deltalake(str(path), orders([3], "bob", 7), mode="append")
        table = deltalake.DeltaTable(str(path))
        table.update(predicate="id = 1", updates={"amount": "9"})
        table.delete("id = 2")
        assert follow_delta(db, "orders", path) == [1, 2, 3]
        assert follow_delta(db, "orders", path) == []  # nothing new: nothing applied twice
        assert db.epoch == 4
        assert rows(db.read("orders")) == delta_rows(path)
        assert rows(db.read("revenue")) == [("ada", 9), ("bob", 7)]
    finally:
        db.close()
