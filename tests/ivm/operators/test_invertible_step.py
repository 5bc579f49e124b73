"""operators.invertible_step: a GROUP BY of invertible functions steps its group versions
in memory (partial sums, looked-up versions, numpy), exactly as its statement would:
groups born, emptied and reborn, NULL keys and values, 128-bit sums, averages and
booleans; a sum past its type's range is refused and changes nothing."""

from __future__ import annotations

from decimal import Decimal as D

import pytest
from oracle.harness import Epoch, Harness

import ivm
from ivm.operators import invertible_aggregate

TABLES = ["CREATE TABLE t (id INTEGER PRIMARY KEY, g VARCHAR, x DECIMAL(12,3), "
          "n BIGINT, ok BOOLEAN)"]
VIEW = ("SELECT g, COUNT(*) AS c, COUNT(x) AS cx, SUM(x) AS sx, AVG(x) AS ax, "
        "SUM(n) AS sn, AVG(n) AS an, BOOL_OR(ok) AS bo, BOOL_AND(ok) AS ba, "
        "SUM(x) FILTER (WHERE ok) AS sf FROM t GROUP BY g")


def _epochs() -> list[Epoch]:
    big = 2**62
    a1, a2 = (1, "a", D("1.5"), 1, True), (1, "a", D("2.5"), 1, False)
    a3 = (1, "a", D("9.999"), 5, True)
    b3, b4 = (3, "b", D("-2.25"), big, False), (4, "b", D("0.001"), big, None)
    b6 = (6, "b", D("7"), big, True)
    null2, null7 = (2, None, None, None, None), (7, None, D("1"), 0, False)
    c5 = (5, "c", None, -3, True)
    return [
        Epoch.of({"t": [("insert", a1), ("insert", null2), ("insert", b3)]}),
        Epoch.of({"t": [("insert", b4), ("insert", c5), ("update", a1, a2)]}),
        # Group a emptied, then born again; group b's sum of n passes 2^63 and comes back.
        Epoch.of({"t": [("delete", a2), ("insert", b6), ("delete", null2)]}),
        Epoch.of({"t": [("insert", a3), ("delete", b4), ("insert", null7)]}),
        Epoch.of({"t": [("update", b6, (6, "c", D("7"), big, True))]}),
    ]


def test_group_versions_stepped_in_memory_equal_recomputation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[int] = []
    original = invertible_aggregate.stepped_versions

    def counted(*args: object, **kwargs: object) -> object:
        steps.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(invertible_aggregate, "stepped_versions", counted)
    harness = Harness(TABLES)
    try:
        harness.create_views({"v": VIEW})
        for epoch in _epochs():
            harness.apply(epoch)
    finally:
        harness.close()
    assert len(steps) == len(_epochs())  # every epoch after the backfill stepped in memory


def test_a_sum_past_its_range_is_refused_and_changes_nothing() -> None:
    db = ivm.connect()
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, g INTEGER, x DECIMAL(38,0))")
    db.execute("CREATE VIEW s AS SELECT g, SUM(x) AS total, COUNT(*) AS n FROM t GROUP BY g")
    nines = D(10**37 * 6)
    db.ingest("t", [{"id": 1, "g": 1, "x": nines}])
    db.ingest("t", [{"id": 2, "g": 2, "x": 1}])  # g=1's version is arranged now
    def contents() -> tuple[list[dict], int]:
        return sorted(db.read("s").to_pylist(), key=lambda r: r["g"]), db.epoch

    before = contents()
    with pytest.raises(ivm.IvmError):
        db.ingest("t", [{"id": 3, "g": 1, "x": nines}])
    assert contents() == before  # a view's rows have no order
    db.ingest("t", [{"id": 3, "g": 1, "x": -nines}])  # still maintained
    assert sorted(db.read("s").to_pylist(), key=lambda r: r["g"]) == [
        {"g": 1, "total": 0, "n": 2}, {"g": 2, "total": 1, "n": 1}]


def test_a_change_that_reaches_no_group_is_no_change(monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[int] = []
    original = invertible_aggregate.stepped_versions
    monkeypatch.setattr(invertible_aggregate, "stepped_versions",
                        lambda *a, **k: steps.append(1) or original(*a, **k))
    harness = Harness(TABLES)
    try:
        harness.create_views({"v": "SELECT g, COUNT(*) AS c, SUM(n) AS s FROM t "
                                   "WHERE n > 100 GROUP BY g"})
        harness.apply(Epoch.of({"t": [("insert", (1, "a", D("1"), 500, True))]}))
        harness.apply(Epoch.of({"t": [("insert", (2, "a", D("1"), 5, True))]}))  # filtered out
        assert len(steps) == 1
        harness.apply(Epoch.of({"t": [("insert", (3, "a", D("1"), 700, True))]}))
        assert len(steps) == 2
    finally:
        harness.close()


def test_a_global_aggregate_keeps_its_row_when_its_input_empties() -> None:
    harness = Harness(TABLES)
    try:
        harness.create_views({"g": "SELECT SUM(x) AS s, COUNT(*) AS c, AVG(n) AS a, "
                                   "BOOL_AND(ok) AS b FROM t"})
        row = (1, "a", D("2.5"), 7, True)
        for ops in [[("insert", row)], [("delete", row)], [("insert", row)]]:
            harness.apply(Epoch.of({"t": ops}))  # 1 row, then NULL/0/NULL/NULL, then 1 row
    finally:
        harness.close()
