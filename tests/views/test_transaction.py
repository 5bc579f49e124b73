"""A COMMIT that fails, or a failure right after it (``views.transaction``): the session
is left as its state is, never half in the epoch, and the next epochs are exact."""

from __future__ import annotations

import subprocess
import sys
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


FILE_TOO_LARGE = """
import os, resource, signal, sys
import ivm
state = sys.argv[1]
db = ivm.connect(state)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
limit = os.path.getsize(os.path.join(state, "ivm.duckdb")) + 500_000
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:
    db.ingest("t", [{"id": 10_000 + i, "k": i % 7, "v": i} for i in range(100_000)])
    print("applied")
except ivm.StateError as error:
    print("refused:", error)
db.ingest("t", [{"id": 400 + i, "k": 4, "v": i} for i in range(3)])  # small: fits
print("epoch", db.epoch)
db.close()
"""


def test_duckdb_failing_to_write_at_commit_applies_nothing(tmp_path: Path) -> None:
    # A real write failure, not an injected one: the file may not grow by more than 0.5 MB,
    # so DuckDB's commit of a large epoch fails writing its log (EFBIG, as a full disk).
    state = tmp_path / "st"
    opened(state).close()
    child = subprocess.run(
        [sys.executable, "-c", FILE_TOO_LARGE, str(state)], capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert "refused: committing failed, nothing was applied" in child.stdout, child.stdout
    assert "epoch 3" not in child.stdout and "epoch 2" in child.stdout
    with ivm.connect(state) as db:
        assert db.epoch == 2 and len(db.read("t")) == 6
        exact(db)
