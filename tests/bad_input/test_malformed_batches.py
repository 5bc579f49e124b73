"""Malformed batches, generated (``bad_input.malformed``): each is either accepted, and then
the table holds exactly what it held plus the batch's rows and every view equals DuckDB's
recomputation, or rejected with an ``IvmError`` (never an ``InternalError``) and nothing
changed. Runs a sequence of batches on one session, so a batch meets the rows earlier
ones left (keys held, rows to delete)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import ivm
from bad_input.malformed import SCHEMA, applies_exactly_or_changes_nothing, malformed_batches
from bad_input.unchanged import assert_unchanged, capture

FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                phases=(Phase.generate,), suppress_health_check=[HealthCheck.too_slow])
"""``make test``'s profile: a fixed dozen sequences (each several batches)."""


@FAST
@given(st.lists(malformed_batches(), min_size=3, max_size=6))
def test_a_malformed_batch_applies_exactly_or_changes_nothing(batches: list[Any]) -> None:
    with ivm.connect() as db:
        db.execute(SCHEMA)
        for batch in batches:
            applies_exactly_or_changes_nothing(db, batch, capture, assert_unchanged)
