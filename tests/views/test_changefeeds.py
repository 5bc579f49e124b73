"""Changefeeds (issue #27, item 3): subscribers, changelogs, Parquet and Delta Lake sinks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ivm
from ivm.sinks import DeltaSink, ParquetSink

DDL = """
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
    CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
"""


def rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def order(i: int, customer: str = "a", amount: int = 5) -> dict:
    return {"id": i, "customer": customer, "amount": amount}


def replay(deltas: list[pa.Table]) -> list[tuple]:
    """The contents that applying every delta (with ``__w``) to an empty view gives."""
    counts: dict[tuple, int] = {}
    for delta in deltas:
        epochs = [c for c in delta.column_names if c == "__epoch"]
        for row in delta.drop_columns(epochs).to_pylist():
            weight = row.pop("__w")
            key = tuple(row.values())
            counts[key] = counts.get(key, 0) + weight
    return sorted(k for k, n in counts.items() for _ in range(n))


@pytest.fixture
def db() -> Any:
    session = ivm.connect()
    session.execute(DDL)
    session.ingest("orders", [order(1)])
    yield session
    session.close()


def test_a_subscriber_gets_the_contents_then_every_epoch(db: Any) -> None:
    seen: list[tuple[int, pa.Table]] = []
    db.subscribe("revenue", lambda epoch, delta: seen.append((epoch, delta)))
    db.ingest("orders", [order(2, "b", 3)])
    db.ingest("orders", [order(3, "a", 1)])
    db.ingest("orders", [])  # a no-op epoch: nothing delivered
    assert [e for e, _ in seen] == [1, 2, 3]
    assert rows(seen[0][1]) == [("a", 5, 1)]
    assert rows(seen[2][1]) == [("a", 5, -1), ("a", 6, 1)]
    assert replay([d for _, d in seen]) == rows(db.read("revenue"))


def test_without_snapshot_only_later_epochs_come(db: Any) -> None:
    seen: list[int] = []
    subscription = db.subscribe("REVENUE", lambda epoch, delta: seen.append(epoch), snapshot=False)
    db.ingest("orders", [order(2)])
    subscription.cancel()
    db.ingest("orders", [order(3)])
    assert seen == [2]


def test_a_failing_subscriber_never_undoes_the_epoch(db: Any) -> None:
    def broken(epoch: int, delta: pa.Table) -> None:
        raise RuntimeError("disk full")

    after: list[int] = []
    subscription = db.subscribe("revenue", broken, snapshot=False)
    db.subscribe("revenue", lambda epoch, delta: after.append(epoch), snapshot=False)
    with pytest.warns(ivm.IvmWarning, match="epoch 2 .*disk full"):
        db.ingest("orders", [order(2)])
    assert db.epoch == 2 and rows(db.read("revenue")) == [("a", 10)]
    assert [(e, str(x)) for e, x in subscription.failures] == [(2, "disk full")]
    assert after == [2]


def test_subscribing_to_what_is_not_a_view_is_refused(db: Any) -> None:
    with pytest.raises(ivm.SqlError, match="no view named 'orders'"):
        db.subscribe("orders", print)
    with pytest.raises(ivm.IvmError, match="callable"):
        db.subscribe("revenue", 42)


def test_a_changelog_keeps_every_committed_epoch_across_restarts(tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "s")
    db.execute(DDL)
    db.execute("CREATE VIEW strict AS SELECT CAST(customer AS BIGINT) AS n FROM orders "
               "WHERE amount < 0")
    db.ingest("orders", [order(1)])
    db.changelog("revenue", retain=3)
    with pytest.raises(ivm.ExecutionError, match="strict"):  # a failed epoch logs nothing
        db.ingest("orders", [order(9, "x", -1)])
    db.ingest("orders", [order(2, "b", 3)])
    db.close()
    db = ivm.connect(tmp_path / "s")
    db.ingest("orders", [order(3)])
    log = db.changes("revenue", since=1)
    assert log.column_names == ["customer", "total", "__w", "__epoch"]
    assert [r["__epoch"] for r in log.to_pylist()] == [2, 3, 3]
    assert rows(db.changes("revenue", since=2)) == [("a", 5, -1, 3), ("a", 10, 1, 3)]
    with pytest.raises(ivm.EpochError, match="no longer kept"):
        db.changes("revenue", since=0)  # the log started after epoch 1
    for epoch in range(4, 7):
        db.ingest("orders", [order(epoch + 10)])
    assert db.changes("revenue", since=3).num_rows == 6  # epochs 4..6
    with pytest.raises(ivm.EpochError, match="after 3 "):
        db.changes("revenue", since=2)  # retention: the last 3 epochs
    db.close()


def test_a_changelog_goes_with_its_view(db: Any) -> None:
    with pytest.raises(ivm.IvmError, match="keeps no changelog"):
        db.changes("revenue")
    db.changelog("revenue", retain=5)
    db.ingest("orders", [order(2)])
    db.execute("CREATE OR REPLACE VIEW revenue AS SELECT customer FROM orders")
    with pytest.raises(ivm.IvmError, match="keeps no changelog"):
        db.changes("revenue")
    db.changelog("revenue", retain=5)
    db.ingest("orders", [order(3)])
    assert rows(db.changes("revenue", since=2)) == [("a", 1, 3)]
    db.changelog("revenue", retain=0)
    with pytest.raises(ivm.IvmError, match="keeps no changelog"):
        db.changes("revenue")


def test_parquet_sink_writes_each_epoch_once(db: Any, tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path / "out")
    db.subscribe("revenue", sink)
    db.ingest("orders", [order(2, "b", 3)])
    db.ingest("orders", [order(3, "b", 1)])
    files = sorted((tmp_path / "out").iterdir())
    assert [f.name for f in files] == [sink.path(e).name for e in (1, 2, 3)]
    sink(3, db.ingest("orders", [], epoch=3)["revenue"])  # delivered again: one copy
    assert len(list((tmp_path / "out").iterdir())) == 3
    deltas = [pq.read_table(f) for f in files]
    assert replay(deltas) == rows(db.read("revenue"))


def test_delta_sink_appends_each_epoch_once(db: Any, tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    sink = DeltaSink(tmp_path / "delta")
    db.subscribe("revenue", sink)
    db.ingest("orders", [order(2, "b", 3)])
    sink(2, pa.table({"customer": ["zzz"], "total": [1], "__w": [1]}))  # already written
    assert sink.written() == 2
    written = deltalake.DeltaTable(str(tmp_path / "delta")).to_pyarrow_table()
    assert sorted(written.column("__epoch").to_pylist()) == [1, 2]
    assert replay([written]) == rows(db.read("revenue"))


def test_subscribers_sinks_and_changelogs_on_spark(spark: Any, tmp_path: Path) -> None:
    """Spark mode: the subscribers, the Parquet and Delta Lake sinks get each epoch's
    delta (the files hold exactly the deltas delivered, and replayed equal the view, which
    equals its recomputation), a failing subscriber undoes nothing and is told later
    epochs, and the changelog keeps the epochs."""
    deltalake = pytest.importorskip("deltalake")
    db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        db.ingest("orders", [order(1)])
        seen: list[tuple[int, pa.Table]] = []
        db.subscribe("revenue", lambda epoch, delta: seen.append((epoch, delta)))
        parquet, delta_sink = ParquetSink(tmp_path / "out"), DeltaSink(tmp_path / "delta")
        db.subscribe("revenue", parquet)
        db.subscribe("revenue", delta_sink)
        told: list[int] = []

        def broken(epoch: int, delta: pa.Table) -> None:
            told.append(epoch)
            if epoch == 2:
                raise RuntimeError("disk full")

        failing = db.subscribe("revenue", broken, snapshot=False)
        db.changelog("revenue", retain=10)
        with pytest.warns(ivm.IvmWarning, match="epoch 2 .*disk full"):
            db.ingest("orders", [order(2, "b", 3)])
        assert db.epoch == 2 and rows(db.read("revenue")) == [("a", 5), ("b", 3)]
        db.ingest("orders", [order(3, "a", 1)])
        assert [(e, str(x)) for e, x in failing.failures] == [(2, "disk full")]
        assert told == [2, 3]  # the failure stopped nothing
        assert [e for e, _ in seen] == [1, 2, 3]
        assert rows(seen[2][1]) == [("a", 5, -1), ("a", 6, 1)]
        recomputed = rows(db.sql("SELECT customer, SUM(amount) AS total FROM orders "
                                 "GROUP BY customer"))
        assert replay([d for _, d in seen]) == rows(db.read("revenue")) == recomputed
        files = sorted((tmp_path / "out").iterdir())
        assert [f.name for f in files] == [parquet.path(e).name for e in (1, 2, 3)]
        written = [pq.read_table(f) for f in files]
        for (epoch, delta), table in zip(seen, written, strict=True):
            assert set(table.column("__epoch").to_pylist()) == {epoch}
            assert rows(table.drop_columns(["__epoch"])) == rows(delta)
        parquet(3, db.ingest("orders", [], epoch=3)["revenue"])  # delivered again: one copy
        assert len(list((tmp_path / "out").iterdir())) == 3
        assert replay(written) == recomputed
        table = deltalake.DeltaTable(str(tmp_path / "delta")).to_pyarrow_table()
        assert delta_sink.written() == 3
        assert rows(table) == sorted(
            r + (e,) for e, d in seen for r in rows(d)
        )  # each epoch's delta once, with its epoch
        assert replay([table]) == recomputed
        assert rows(db.changes("revenue", since=1)) == [
            ("a", 5, -1, 3), ("a", 6, 1, 3), ("b", 3, 1, 2)]
    finally:
        db.close()
