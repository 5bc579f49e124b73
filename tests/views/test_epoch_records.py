"""The epochs' times written into the state's record some epochs at a time
(``ivm.views.epoch_records``): held until ``WRITE_EVERY``, a DDL that forgets, a read of
the record or the close, never an epoch that did not commit, never one twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ivm
from ivm.views import history, relation_times
from ivm.views.epoch_records import WRITE_EVERY

DDL = """
CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT);
CREATE VIEW per_k AS SELECT k, COUNT(*) AS n FROM t GROUP BY k;
CREATE VIEW ids AS SELECT id FROM t;
"""


def written_epochs(db: ivm.Session) -> list[int]:
    """The epochs the state's history holds, in order (raw: nothing held is written)."""
    present = db._con.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = ?", [history.HISTORY]
    ).fetchall()
    if not present:
        return []
    rows = db._con.execute(f"SELECT epoch FROM {history.HISTORY} ORDER BY epoch").fetchall()
    return [int(r[0]) for r in rows]


def relation_epochs(db: ivm.Session, name: str) -> list[int]:
    rows = db._con.execute(
        f"SELECT epoch FROM {relation_times.RELATIONS} WHERE relation = ? ORDER BY epoch",
        [name],
    ).fetchall()
    return [int(r[0]) for r in rows]


def epochs(db: ivm.Session, first: int, count: int) -> None:
    for i in range(first, first + count):
        db.ingest("t", [{"id": i, "k": i % 3}])


def test_epochs_are_held_until_they_make_write_every() -> None:
    db = ivm.connect()
    db.execute(DDL)
    epochs(db, 0, WRITE_EVERY - 1)
    assert written_epochs(db) == []
    epochs(db, WRITE_EVERY, 1)
    assert written_epochs(db) == list(range(1, WRITE_EVERY + 1))
    assert relation_epochs(db, "per_k") == list(range(1, WRITE_EVERY + 1))
    epochs(db, 100, 2)
    assert db._history().epoch == WRITE_EVERY + 2  # a read writes what is held
    assert written_epochs(db) == list(range(1, WRITE_EVERY + 3))
    db.close()


def test_closing_writes_the_held_epochs(tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "state")
    db.execute(DDL)
    epochs(db, 0, 3)
    db.close()
    again = ivm.connect(tmp_path / "state")
    assert written_epochs(again) == [1, 2, 3]
    assert again.stats()["per_k"].epochs_total == 3
    assert "last epoch 3" in again.explain("per_k", analyze=True)
    again.close()


def test_an_epoch_rolled_back_while_writing_leaves_the_held_ones_held(monkeypatch: Any) -> None:
    db = ivm.connect()
    db.execute(DDL)
    epochs(db, 0, WRITE_EVERY - 1)
    monkeypatch.setattr(db._catalog, "advance_sql", lambda: "SELECT no_such_column")
    with pytest.raises(ivm.IvmError):  # fails after its times and the held ones were written
        epochs(db, 500, 1)
    monkeypatch.undo()
    assert written_epochs(db) == [] and db.epoch == WRITE_EVERY - 1
    epochs(db, 600, 1)  # the same epoch number, committed this time
    assert written_epochs(db) == list(range(1, WRITE_EVERY + 1))  # each once
    db.close()


def test_a_dropped_view_takes_its_held_epochs_with_it() -> None:
    db = ivm.connect()
    db.execute(DDL)
    epochs(db, 0, 3)
    db.execute("DROP VIEW ids")
    assert written_epochs(db) == [1, 2, 3]  # written by the DDL's transaction
    assert relation_epochs(db, "ids") == []
    assert relation_epochs(db, "per_k") == [1, 2, 3]
    db.execute("CREATE VIEW ids AS SELECT id FROM t")
    epochs(db, 10, 1)
    assert db.stats()["ids"].epochs_total == 1
    db.close()
