"""Compaction counts a trace's tail across sessions (found by the soak,
``benchmarks/bench_soak.py``, reopened every 100 epochs). Counted per session, a trace
gaining fewer than ``COMPACT_MIN_ROWS`` (50k then, 5k now) rows between an open and a
close was never compacted, however many sessions passed: after the 1,000-epoch soak the
recursive view's derivations trace held 311,897 rows that consolidate to 1, and a job
reopening its state for every batch would never compact at all. A clean close now keeps
every trace's tail in the catalog database (``Compactor.save``) and the next open takes
it back."""

from __future__ import annotations

from pathlib import Path

import pytest

import ivm
from ivm.storage import traces

MIN_ROWS = 30


def test_a_trace_is_compacted_when_its_tail_grows_over_many_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", MIN_ROWS)
    state = str(tmp_path / "state")
    with ivm.connect(state) as db:
        db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
        db.ingest("t", [{"id": i, "v": 0} for i in range(20)])
    version = 0
    for _ in range(12):  # sessions, each updating 3 rows in 3 epochs: 18 rows appended
        with ivm.connect(state) as db:
            for _ in range(3):
                db.ingest("t", [{"id": i, "v": version, "__w": -1} for i in range(3)]
                          + [{"id": i, "v": version + 1, "__w": 1} for i in range(3)])
                version += 1
    with ivm.connect(state) as db:
        trace = db._names.relation_trace("t")
        held = db._con.execute(f"SELECT count(*) FROM {trace}").fetchone()[0]
    # 20 live rows; one session compacts a tail of 30: never more than live + 2 x 30
    assert held <= 20 + 2 * MIN_ROWS, held
