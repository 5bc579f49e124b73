"""Names with spaces, quotes and mixed case work everywhere, compaction included."""

from __future__ import annotations

import pytest

import ivm
import ivm.storage.traces


@pytest.fixture
def small_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ivm.storage.traces, "COMPACT_MIN_ROWS", 4)


def test_quoted_names_are_maintained_and_compacted(small_compaction: None) -> None:
    db = ivm.connect()
    db.execute(
        'CREATE TABLE "my orders" ("order id" BIGINT PRIMARY KEY, "who\'s" VARCHAR, "Amt" INT);'
        'CREATE VIEW "per ""who""" AS SELECT "who\'s" AS w, SUM("Amt") AS total, COUNT(*) AS n '
        'FROM "my orders" GROUP BY "who\'s"'
    )
    expected: dict[str, tuple[int, int]] = {}
    rows = {}
    for epoch in range(12):
        batch = [{"order id": epoch, "who's": f"c{epoch % 3}", "Amt": epoch}]
        if epoch >= 2:
            old = rows.pop(epoch - 2)
            batch.append({**old, "__w": -1})
            batch[0]["__w"] = 1
        rows[epoch] = {"order id": epoch, "who's": f"c{epoch % 3}", "Amt": epoch}
        db.ingest("my orders", batch)
    for row in rows.values():
        total, n = expected.get(row["who's"], (0, 0))
        expected[row["who's"]] = (total + row["Amt"], n + 1)
    got = {r["w"]: (r["total"], r["n"]) for r in db.read('per "who"').to_pylist()}
    assert got == expected
    sizes = db._compactor.sizes
    assert sizes, "traces were appended but none is tracked for compaction"
    assert all(s.appended < 4 or s.base == 0 for s in sizes.values())
    assert any(s.base > 0 for s in sizes.values()), "no trace was ever compacted"
