"""The oracle harness itself: its comparisons, and that it catches a wrong engine."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

import ivm
from oracle.harness import Epoch, Harness, multiset_mismatch, rows_of

EVENTS = "CREATE TABLE events (k INTEGER, v DOUBLE, tag VARCHAR)"


def test_multisets_count_copies_and_match_floats_within_tolerance() -> None:
    expected = [(1, 0.3, "a"), (1, 0.3, "a"), (None, float("nan"), None)]
    actual = [(None, float("nan"), None), (1, 0.1 + 0.2, "a"), (1, 0.30000000001, "a")]
    assert multiset_mismatch(expected, actual, 1e-9, 1e-9) == ([], [])
    missing, extra = multiset_mismatch(expected, actual[:2], 1e-9, 1e-9)
    assert (missing, extra) == ([(1, 0.3, "a")], [])
    assert multiset_mismatch([(1, 0.3)], [(1, 0.31)], 1e-9, 1e-9) == ([(1, 0.3)], [(1, 0.31)])
    assert multiset_mismatch([(None,)], [(0,)], 1e-9, 1e-9) == ([(None,)], [(0,)])
    assert multiset_mismatch([(Decimal("1.50"),)], [(Decimal("1.51"),)], 1e-9, 1e-9)[0]


def test_rows_keep_repeated_column_names() -> None:
    table = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["k", "k"])
    assert rows_of(table) == [(1, 2)]


class _Wrong:
    """A session that answers wrongly in one way, to show the harness notices."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.session = ivm.connect()

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)

    def read(self, name: str) -> pa.Table:
        table = self.session.read(name)
        if self.fault == "read" and name == "v" and table.num_rows:
            return table.slice(1)
        return table

    def ingest(self, *args: object, **kwargs: object) -> dict[str, pa.Table]:
        deltas = self.session.ingest(*args, **kwargs)
        if self.fault == "unconsolidated":
            return {n: pa.concat_tables([d, d]) if d.num_rows else d for n, d in deltas.items()}
        if self.fault == "missing delta":
            return {}
        return deltas

    def plain_sql(self, view: str) -> str:
        sql = self.session.plain_sql(view)
        if self.fault == "planner" and self.session.epoch:
            return f"SELECT * FROM ({sql}) AS p WHERE p.n > 1"  # a planner that drops rows
        return sql


@pytest.mark.parametrize("fault", ["read", "unconsolidated", "missing delta", "planner"])
def test_a_wrong_engine_is_caught(fault: str) -> None:
    harness = Harness([EVENTS], connect=lambda: _Wrong(fault))
    try:
        harness.create_views({"v": "SELECT k, COUNT(*) AS n FROM events GROUP BY k"})
        message = "second oracle" if fault == "planner" else None
        with pytest.raises(AssertionError, match=message):
            harness.apply(Epoch.of({"events": [("insert", (1, 0.5, "a")),
                                               ("insert", (1, 0.5, "a")),
                                               ("insert", (2, 0.5, "b"))]}))
    finally:
        harness.close()
