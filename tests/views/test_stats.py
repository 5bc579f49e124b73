"""``db.stats()`` (issue #27, item 10): rows, state bytes, epoch times and epochs per view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ivm

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
