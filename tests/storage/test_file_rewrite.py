"""A state file closed with many free blocks is rewritten (``ivm.storage.file_rewrite``):
smaller, with no free blocks, the same state when reopened, and exact epochs after it; a
file with few free blocks is left alone; a copy a crash left is removed at the next open;
a full disk during the rewrite warns and keeps the file. Spark mode: the partition files
written since the open are rewritten as the session closes. (kill -9 during a rewrite:
``tests/views/test_faults.py``, points ``file.*``.)"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import ivm
from ivm import faults
from ivm.storage import file_rewrite

DDL = "CREATE TABLE t (k BIGINT PRIMARY KEY, g BIGINT, note VARCHAR)"
VIEWS = {
    "per_group": "SELECT g, COUNT(*) AS n, MAX(note) AS top FROM t GROUP BY g",
    "groups": "SELECT DISTINCT g FROM t",
}
ROWS = 60_000


def rows(keys: np.ndarray, weight: int) -> pa.Table:
    """Rows of ``t`` for ``keys``: a group and a note that are functions of the key."""
    notes = pa.array([f"note {k % 997:04d} of {k}" for k in keys.tolist()])
    return pa.table({"k": keys, "g": keys % 50, "note": notes,
                     "__w": np.full(len(keys), weight, np.int64)})


def churned_state(state: Path) -> None:
    """A closed state at epoch 7 whose rows were deleted and inserted again, a third at a
    time: its traces compacted, their old blocks free in the file (≈2.4 of 6.8 MB)."""
    with ivm.connect(state) as db:
        db.execute(DDL + ";" + ";".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
        db.ingest("t", rows(np.arange(ROWS), 1))
        for third in range(3):
            keys = np.arange(third * ROWS // 3, (third + 1) * ROWS // 3)
            db.ingest("t", rows(keys, -1))
            db.ingest("t", rows(keys, 1))


def file_blocks(file: Path) -> tuple[int, int]:
    """The free bytes of state file ``file`` and its bytes in blocks."""
    con = duckdb.connect(str(file), read_only=True)
    try:
        return file_rewrite.free_bytes(con)
    finally:
        con.close()


def assert_exact(db: ivm.Session) -> None:
    """Every view equals DuckDB computing it over the table's rows."""
    t = db.read("t")  # noqa: F841 - scanned by name below
    for name, sql in VIEWS.items():
        expected = duckdb.sql(sql).arrow().read_all()
        ours = db.read(name)
        key = [(c, "ascending") for c in ours.column_names]
        assert ours.sort_by(key).to_pylist() == expected.sort_by(key).to_pylist(), name


@pytest.fixture
def rewrite_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """A free megabyte is enough for a rewrite (the test's state is small)."""
    monkeypatch.setattr(file_rewrite, "REWRITE_MIN_BYTES", 2**20)


def test_a_sparse_file_is_rewritten_at_close_and_reopens_the_same(
    tmp_path: Path, rewrite_small_files: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept, rewritten = tmp_path / "kept", tmp_path / "rewritten"
    with monkeypatch.context() as never:
        never.setattr(file_rewrite, "REWRITE_FREE_SHARE", 2.0)
        churned_state(kept)
    churned_state(rewritten)
    free, total = file_blocks(kept / "ivm.duckdb")
    assert free >= total * file_rewrite.REWRITE_FREE_SHARE, (free, total)  # else a moot test
    new_free, new_total = file_blocks(rewritten / "ivm.duckdb")
    assert new_free == 0 and new_total <= total - free, (new_free, new_total, free, total)
    assert not file_rewrite.copy_path(rewritten / "ivm.duckdb").exists()
    with ivm.connect(rewritten) as db:
        assert db.epoch == 7 and sorted(db.views) == sorted(VIEWS)
        assert db.read("t").num_rows == ROWS
        assert_exact(db)
        db.ingest("t", rows(np.arange(ROWS, ROWS + 500), 1))
        db.ingest("t", rows(np.arange(0, 300), -1))
        assert_exact(db)
    with ivm.connect(rewritten) as db:
        assert db.epoch == 9
        assert_exact(db)


def test_a_file_with_few_free_blocks_is_left_as_it_was(tmp_path: Path) -> None:
    churned_state(tmp_path / "state")  # free blocks, but fewer than REWRITE_MIN_BYTES
    file = tmp_path / "state" / "ivm.duckdb"
    before = file.stat()
    with ivm.connect(tmp_path / "state") as db:
        db.ingest("t", rows(np.arange(ROWS, ROWS + 10), 1))
    assert file.stat().st_ino == before.st_ino  # the same file, not a copy renamed over it
    assert file_blocks(file)[0] > 0


def test_a_copy_left_by_a_crash_is_removed_at_open(tmp_path: Path) -> None:
    churned_state(tmp_path / "state")
    file = tmp_path / "state" / "ivm.duckdb"
    copy = file_rewrite.copy_path(file)
    copy.write_bytes(b"half a copy")
    copy.with_name(copy.name + ".wal").write_bytes(b"its log")
    with ivm.connect(tmp_path / "state") as db:
        assert not copy.exists() and not copy.with_name(copy.name + ".wal").exists()
        assert_exact(db)


@pytest.mark.parametrize("point", ["file.copy", "file.flushed"])
def test_a_full_disk_while_rewriting_warns_and_keeps_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    state, file = tmp_path / "state", tmp_path / "state" / "ivm.duckdb"
    churned_state(state)
    monkeypatch.setattr(file_rewrite, "REWRITE_MIN_BYTES", 0)  # every close rewrites
    monkeypatch.setattr(file_rewrite, "REWRITE_FREE_SHARE", 0.0)
    db = ivm.connect(state)
    db.ingest("t", rows(np.arange(ROWS, ROWS + 100), 1))
    inode = file.stat().st_ino
    faults.arm(point, "enospc")
    try:
        with pytest.warns(ivm.IvmWarning, match="could not .*state file.*No space left"):
            db.close()
    finally:
        faults.disarm()
    assert file.stat().st_ino == inode  # kept, not replaced
    assert sorted(p.name for p in state.iterdir()) == ["ivm.duckdb", "ivm.duckdb.memory"]
    with ivm.connect(state) as db:
        assert db.epoch == 8
        assert_exact(db)
    assert file.stat().st_ino != inode  # this close rewrote it


def test_spark_partition_files_written_since_the_open_are_rewritten_at_close(
    tmp_path: Path, spark: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_rewrite, "REWRITE_MIN_BYTES", 0)  # every file written rewritten
    monkeypatch.setattr(file_rewrite, "REWRITE_FREE_SHARE", 0.0)
    state = tmp_path / "state"
    with ivm.connect(state, spark=spark, partitions=2) as db:
        db.execute(DDL + ";" + ";".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
        db.ingest("t", rows(np.arange(2_000), 1))
        db.ingest("t", rows(np.arange(500), -1))
        files = sorted(state.glob("*/*/*/part-*.duckdb"))
        inodes = {f: f.stat().st_ino for f in files}
    assert len(files) >= 4, files  # the table's and the views' stages, two partitions each
    assert all(f.stat().st_ino != inodes[f] for f in files)
    assert all(file_blocks(f)[0] == 0 for f in files)
    assert not list(state.glob(f"**/*{file_rewrite.COPY_SUFFIX}*"))
    with ivm.connect(state, spark=spark) as db:
        assert db.epoch == 2
        assert_exact(db)
        db.ingest("t", rows(np.arange(2_000, 2_100), 1))
        assert_exact(db)
    inodes = {f: f.stat().st_ino for f in files}
    with ivm.connect(state, spark=spark) as db:
        assert_exact(db)  # reads write no partition file
    assert all(f.stat().st_ino == inodes[f] for f in files)  # none written since the open
