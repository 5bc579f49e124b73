"""Malformed batches, generated (``bad_input.malformed``): each is either accepted, and then
the table holds exactly what it held plus the batch's rows and every view equals DuckDB's
recomputation, or rejected with an ``IvmError`` (never an ``InternalError``) and nothing
changed. Runs a sequence of batches on one session, so a batch meets the rows earlier
ones left (keys held, rows to delete)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import ivm
from bad_input.malformed import COLUMNS, malformed_batches
from bad_input.unchanged import assert_unchanged, assert_views_recompute, capture

SCHEMA = """
CREATE TABLE t (id BIGINT PRIMARY KEY, g VARCHAR NOT NULL, v INTEGER);
CREATE VIEW by_g AS SELECT g, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY g;
CREATE VIEW self AS SELECT a.id, b.v FROM t a JOIN t b ON a.v = b.id;
"""

FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                phases=(Phase.generate,), suppress_health_check=[HealthCheck.too_slow])
"""``make test``'s profile: a fixed dozen sequences (each several batches)."""


def rows_of(batch: Any) -> list[dict[str, Any]]:
    """The rows a batch of any kind holds."""
    if isinstance(batch, pa.Table):
        return batch.to_pylist()
    if isinstance(batch, dict):
        return [dict(zip(batch, values, strict=True)) for values in zip(*batch.values(),
                                                                          strict=True)]
    return batch


def table_rows(db: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r[c] for c in COLUMNS) for r in db.read("t").to_pylist())


@FAST
@given(st.lists(malformed_batches(), min_size=3, max_size=6))
def test_a_malformed_batch_applies_exactly_or_changes_nothing(batches: list[Any]) -> None:
    with ivm.connect() as db:
        db.execute(SCHEMA)
        for batch in batches:
            before, held = capture(db), table_rows(db)
            try:
                db.ingest("t", batch)
            except ivm.IvmError as error:
                assert not isinstance(error, ivm.InternalError), error
                assert_unchanged(db, before)
                continue
            expected = held.copy()
            for row in rows_of(batch):
                expected[tuple(row[c] for c in COLUMNS)] += row["__w"]
            assert +expected == expected, "accepted a delete of a row that was not there"
            assert table_rows(db) == +expected
            assert_views_recompute(db)
