"""A COMMIT that fails, or a failure right after it (``views.transaction``): the session
is left as its state is, never half in the epoch, and the next epochs are exact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import ivm
from ivm import faults

VIEW = "SELECT k, SUM(v) AS total, COUNT(*) AS n FROM t GROUP BY k"


@pytest.fixture
def armed() -> Iterator[None]:
    """Disarm every fault point after the test."""
    yield
    faults.disarm()


def rows(k: int, n: int = 3) -> list[dict[str, Any]]:
    """``n`` rows of key ``k``."""
    return [{"id": k * 100 + i, "k": k, "v": i} for i in range(n)]


def contents(db: ivm.Session) -> dict[str, Any]:
    """The table's and the view's rows, and the epoch."""
    return {"t": sorted(map(repr, db.read("t").to_pylist())),
            "v": sorted(map(repr, db.read("v").to_pylist())), "epoch": db.epoch}


def exact(db: ivm.Session) -> None:
    """The view equals DuckDB recomputing it over the table's rows."""
    con = duckdb.connect()
    con.register("t", db.read("t"))
    expected = sorted(con.execute(VIEW).fetchall())
    assert sorted(tuple(r.values()) for r in db.read("v").to_pylist()) == expected


def opened(state: Path) -> ivm.Session:
    """A session on ``state`` with the table and view, after one epoch."""
    db = ivm.connect(state)
    db.execute(f"CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT); "
               f"CREATE VIEW v AS {VIEW}")
    db.ingest("t", rows(1))
    return db


def test_a_full_disk_at_commit_applies_nothing(tmp_path: Path, armed: None) -> None:
    with opened(tmp_path / "st") as db:
        before = contents(db)
        faults.arm("commit.before", "enospc")
        with pytest.raises(ivm.StateError, match="committing failed, nothing was applied"):
            db.ingest("t", rows(2))
        assert contents(db) == before
        db.ingest("t", rows(2))  # the same batch again: its transaction was closed
        db.ingest("t", rows(1, 1), mode="upsert")
        exact(db)
        assert db.epoch == 3
    with ivm.connect(tmp_path / "st") as db:
        assert db.epoch == 3
        exact(db)


def test_an_interrupt_at_commit_applies_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    def interrupted(name: str, detail: str = "") -> None:
        if name == "commit.before":
            raise KeyboardInterrupt

    with opened(tmp_path / "st") as db:
        before = contents(db)
        with monkeypatch.context() as patch:
            patch.setattr(faults, "reached", interrupted)
            with pytest.raises(KeyboardInterrupt):
                db.ingest("t", rows(2))
        assert contents(db) == before
        db.ingest("t", rows(2))
        exact(db)
    with ivm.connect(tmp_path / "st") as db:
        assert db.epoch == 2
        exact(db)


def test_a_failure_right_after_commit_leaves_the_epoch_committed(
    tmp_path: Path, armed: None
) -> None:
    with opened(tmp_path / "st") as db:
        faults.arm("commit.after", "enospc")
        with pytest.raises(ivm.IvmError):
            db.ingest("t", rows(2))
        assert db.epoch == 2  # the session counts the epoch its state committed
        exact(db)
        assert len(db.read("t")) == 6
        db.ingest("t", rows(3))
        exact(db)
        assert db.epoch == 3
    with ivm.connect(tmp_path / "st") as db:
        assert db.epoch == 3
        exact(db)
