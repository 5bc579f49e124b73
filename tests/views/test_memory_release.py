"""A closed session holds none of its in-memory state, and an epoch keeps none of its data
once it has committed (found by the soak, ``benchmarks/bench_soak.py``: a session sits
in reference cycles, so a closed one lived until Python's next full collection, its
row indexes and arrangements beside the next session's; and the last epoch's
after-commit actions, with the arrays they close over, stayed on the session until the
next transaction began).

Python's cyclic collector is off during each test, as it is most of the time between
two full collections of a long-running process: what is still reachable through the
session's cycles then stays in memory.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import ivm
from ivm.views.resources import held_bytes

ROWS = 100_000
SLACK = 64 * 1024
"""Arrow bytes a closed session may still account for (none expected)."""


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic collector off for the test."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _state(path: Path) -> ivm.Session:
    """A persistent session with a grouped view over ``ROWS`` rows and one more epoch
    (row index, arrangements and a running MAX's memory all built)."""
    db = ivm.connect(str(path))
    db.execute("CREATE TABLE t (a BIGINT PRIMARY KEY, b BIGINT);"
               "CREATE VIEW v AS SELECT b, COUNT(*) AS n, MAX(a) AS m FROM t GROUP BY b")
    db.ingest("t", pa.table({"a": pa.array(range(ROWS)), "b": pa.array(range(ROWS))}))
    db.ingest("t", pa.table({"a": [-1], "b": [3]}))
    return db


def test_a_closed_session_holds_no_memory(tmp_path: Path, no_cyclic_gc: None) -> None:
    before = pa.total_allocated_bytes()
    db = _state(tmp_path / "state")
    assert held_bytes(db) > 0
    db.close()
    assert held_bytes(db) == 0
    assert pa.total_allocated_bytes() - before <= SLACK
    with ivm.connect(str(tmp_path / "state")) as again:  # what close saved is all there
        assert again.read("v").num_rows == ROWS


def test_an_epoch_keeps_no_actions_after_its_commit(tmp_path: Path, no_cyclic_gc: None) -> None:
    with _state(tmp_path / "state") as db:
        assert db._on_commit == [] and db._on_rollback == []
        with pytest.raises(ivm.ConstraintError):  # a rolled-back epoch keeps none either
            db.ingest("t", pa.table({"a": [-1], "b": [4]}))
        assert db._on_commit == [] and db._on_rollback == []
        assert db.read("v").num_rows == ROWS
