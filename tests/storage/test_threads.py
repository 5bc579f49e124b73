"""DuckDB on one thread for a small epoch (``ivm.storage.threads``), and put back after."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

import ivm
from ivm.storage.threads import SMALL_EPOCH_ROWS, one_thread_if_small, thread_count


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("SET threads = 3")
    return connection


def test_a_small_epoch_runs_on_one_thread_and_gets_its_threads_back(con):
    with one_thread_if_small(con, 10, 3):
        assert thread_count(con) == 1
    assert thread_count(con) == 3


def test_a_large_epoch_keeps_every_thread(con):
    with one_thread_if_small(con, SMALL_EPOCH_ROWS, 3):
        assert thread_count(con) == 3
    assert thread_count(con) == 3


def test_the_threads_come_back_when_the_epoch_fails(con):
    with pytest.raises(ZeroDivisionError), one_thread_if_small(con, 10, 3):
        raise ZeroDivisionError
    assert thread_count(con) == 3


def test_one_thread_already_needs_no_statement():
    connection = duckdb.connect()
    connection.execute("SET threads = 1")
    connection.close()  # any statement would raise
    with one_thread_if_small(connection, 10, 1):
        pass


def orders_session(tmp_path) -> ivm.Session:
    db = ivm.connect(tmp_path / "state")
    db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
    db.execute("CREATE VIEW s AS SELECT v % 3 AS k, SUM(v) AS total FROM t GROUP BY k")
    return db


def seen_threads(db: ivm.Session, monkeypatch) -> list[int]:
    """Record DuckDB's threads each time an epoch advances its counter (inside its
    transaction)."""
    seen: list[int] = []
    advance = type(db)._advance_epoch

    def spying(self, changed):
        seen.append(thread_count(self._con))
        advance(self, changed)

    monkeypatch.setattr(type(db), "_advance_epoch", spying)
    return seen


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "v": ids})


def test_a_session_runs_small_epochs_on_one_thread_and_large_ones_on_all(tmp_path, monkeypatch):
    db = orders_session(tmp_path)
    outside = thread_count(db._con)
    seen = seen_threads(db, monkeypatch)
    db.ingest("t", rows(0, SMALL_EPOCH_ROWS))
    db.ingest("t", rows(SMALL_EPOCH_ROWS, 5))
    assert seen == [outside, 1 if outside > 1 else outside]
    assert thread_count(db._con) == outside
    db.close()


def test_a_rejected_small_epoch_gives_the_threads_back(tmp_path):
    db = orders_session(tmp_path)
    outside = thread_count(db._con)
    db.ingest("t", rows(0, 5))
    with pytest.raises(ivm.ConstraintError):
        db.ingest("t", rows(0, 5))  # the same keys again
    assert thread_count(db._con) == outside
    assert db.read("t").num_rows == 5
    db.close()
