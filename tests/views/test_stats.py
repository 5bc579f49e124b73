"""``db.stats()`` (issue #27, item 10): rows, state bytes, epoch times and epochs per view."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import ivm
from ivm.views import relation_times

DDL = """
    CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v VARCHAR);
    CREATE VIEW per_k AS SELECT k, COUNT(*) AS n FROM t GROUP BY k;
    CREATE VIEW pairs AS SELECT x.id, y.id AS other FROM t AS x JOIN t AS y ON x.k = y.k;
    CREATE TABLE idle (a BIGINT);
    CREATE VIEW quiet AS SELECT a FROM idle;
"""


def load(db: Any, epoch: int) -> None:
    ids = range(epoch * 100, (epoch + 1) * 100)
    db.ingest("t", pa.table({"id": list(ids), "k": [i % 5 for i in ids], "v": ["x"] * 100}))


@pytest.mark.parametrize("mode", ["embedded", "spark"])
def test_stats_per_view(mode: str, spark: Any, tmp_path: Path) -> None:
    if mode == "embedded":
        db = ivm.connect(tmp_path / "s")
    else:
        db = ivm.connect(tmp_path / "s", spark=spark, partitions=2)
    try:
        db.execute(DDL)
        load(db, 0)
        first = db.stats()
        load(db, 1)
        stats = db.stats()
        assert set(stats) == {"t", "per_k", "pairs", "idle", "quiet"}
        assert (stats["t"].kind, stats["t"].rows) == ("table", 200)
        assert (stats["per_k"].kind, stats["per_k"].rows) == ("view", 5)
        assert stats["pairs"].rows == 5 * 40 * 40
        assert stats["pairs"].epochs == 2 and stats["quiet"].epochs == 0
        assert stats["pairs"].last_seconds is not None and stats["pairs"].median_seconds > 0
        assert stats["quiet"].last_seconds is None and stats["quiet"].rows == 0
        assert stats["pairs"].state_bytes > first["pairs"].state_bytes > 0
        assert stats["pairs"].state_bytes > stats["per_k"].state_bytes
        if mode == "embedded":
            assert stats["pairs"].memory_bytes > 0  # the join's arrangements
    finally:
        db.close()


@pytest.mark.parametrize("mode", ["embedded", "spark"])
def test_a_reopened_state_keeps_each_views_epochs(mode: str, spark: Any, tmp_path: Path) -> None:
    def connect() -> Any:
        if mode == "embedded":
            return ivm.connect(tmp_path / "s")
        return ivm.connect(tmp_path / "s", spark=spark, partitions=2)

    db = connect()
    try:
        db.execute(DDL)
        load(db, 0)
        load(db, 1)
        delta = db.ingest("t", [{"id": 1000, "k": 0, "v": "y"}])  # epoch 3: one row
        before = db.stats()
    finally:
        db.close()
    db = connect()
    try:
        stats = db.stats()
        for name in ("t", "per_k", "pairs"):  # what the state recorded, not this session
            old, new = before[name], stats[name]
            assert (new.epochs, new.epochs_total, old.epochs_total) == (0, 3, 3), name
            assert (new.last_seconds, new.median_seconds) == (
                old.last_seconds, old.median_seconds), name
            assert new.last_seconds is not None and new.median_seconds > 0, name
            assert new.last_epoch == 3, name
        assert stats["t"].last_rows == 1
        assert stats["pairs"].last_rows == delta["pairs"].num_rows == 2 * 41 - 1
        assert stats["per_k"].last_rows == delta["per_k"].num_rows == 2
        assert (stats["quiet"].epochs_total, stats["quiet"].last_seconds) == (0, None)
        assert (stats["idle"].last_epoch, stats["idle"].last_rows) == (None, None)
        text = db.explain("pairs", analyze=True)  # the last epoch's profile, from the state
        assert "last epoch 3 (recorded in the state" in text
        counts = [int(n.replace(",", "")) for n in re.findall(
            r"\[(?:spark stage: )?[\d.]+ ms(?: in \d+ tasks?|, \d+ statements?)?, ([\d,]+) rows",
            text)]
        if mode == "spark":  # the join's stage and the stage storing the view: 81 rows each
            assert counts == [81, 81, 81]  # the output line, then both stages' lines
        else:  # the view's consolidated change (the join's delta is fused into it)
            assert counts[0] == 81
        load(db, 5)
        after = db.stats()
        assert (after["pairs"].epochs, after["pairs"].epochs_total) == (1, 4)
        assert after["pairs"].last_epoch == 4
    finally:
        db.close()


def test_the_record_keeps_each_relations_last_epochs(monkeypatch: Any) -> None:
    monkeypatch.setattr(relation_times, "KEPT", 3)
    monkeypatch.setattr(relation_times, "PRUNE_EVERY", 2)
    db = ivm.connect()
    try:
        db.execute(DDL)
        for epoch in range(7):
            load(db, epoch)
        db.ingest("idle", [{"a": 1}])  # epoch 8: prunes, leaving idle's one epoch
        db._records.flush(db._con)  # the epochs' times held (views.epoch_records), written
        kept = db._con.execute(
            f"SELECT relation, count(*) FROM {relation_times.RELATIONS} GROUP BY ALL ORDER BY 1"
        ).fetchall()
        assert kept == [("idle", 1), ("pairs", 3), ("per_k", 3), ("quiet", 1), ("t", 3)]
        stats = db.stats()
        assert (stats["pairs"].epochs_total, stats["pairs"].last_epoch) == (7, 7)
        assert stats["quiet"].epochs_total == 1
        # An epoch failing after it was recorded, before its commit: the record goes too.
        monkeypatch.setattr(db._catalog, "advance_sql", lambda: "SELECT no_such_column")
        with pytest.raises(ivm.IvmError):
            db.ingest("t", [{"id": 1000, "k": 0, "v": "y"}])
        monkeypatch.undo()
        assert db.epoch == 8 and db.stats()["t"].epochs_total == 7  # recorded nothing
        assert "last epoch 8" in db.explain("pairs", analyze=True)
        db.execute("DROP VIEW pairs")  # its record goes; a view of that name starts afresh
        db.execute("CREATE VIEW pairs AS SELECT id FROM t")
        assert (db.stats()["pairs"].epochs_total, db.stats()["pairs"].last_seconds) == (0, None)
    finally:
        db.close()


def test_state_from_before_the_record_opens(tmp_path: Path) -> None:
    with ivm.connect(tmp_path / "s") as db:
        db.execute(DDL)
        load(db, 0)
    con = duckdb.connect(str(tmp_path / "s" / "ivm.duckdb"))
    for table in (relation_times.RELATIONS, relation_times.RETIRED, relation_times.PROFILE):
        con.execute(f"DROP TABLE {table}")
    con.close()
    with ivm.connect(tmp_path / "s") as db:
        assert db.stats()["pairs"].last_seconds is None
        assert "no epoch has run on this state" in db.explain("pairs", analyze=True)
        load(db, 1)
    with ivm.connect(tmp_path / "s") as db:
        assert db.stats()["pairs"].epochs_total == 1
        assert "last epoch 2 (recorded" in db.explain("pairs", analyze=True)
