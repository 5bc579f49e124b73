"""Rows of an Arrow table as sorted tuples, for exact comparisons in hand-written tests."""

from __future__ import annotations

import pyarrow as pa


def rows(table: pa.Table) -> list[tuple]:
    """The table's rows as tuples, sorted (None first in each column)."""
    return sorted(
        (tuple(r.values()) for r in table.to_pylist()),
        key=lambda t: tuple((v is not None, v) for v in t),
    )
