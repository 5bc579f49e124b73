"""Invertible functions' values from their moments, in memory (``Invertible.compute``).

Each function here is the Arrow twin of a ``finalize`` in ``ivm.functions.aggregates``:
given a group's moments (Arrow arrays without NULLs: BIGINT counts as int64, exact sums
as 128-bit integers, see ``ivm.functions.wide_integers``) it returns the values, NULL
where the SQL form gives NULL, with the same arithmetic DuckDB does, so a group's value
is the same whichever form computed it. None: a moment of a type it does not handle
(the SQL form is used then).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa

from ivm.functions.wide_integers import Wide, is_wide


def count(moments: Mapping[str, pa.Array]) -> pa.Array | None:
    """COUNT(*) and COUNT(x): the count itself."""
    n = moments["n"]
    return n if pa.types.is_int64(n.type) else None


def exact_sum(moments: Mapping[str, pa.Array]) -> pa.Array | None:
    """SUM over exact numbers: the sum, NULL where no value was counted."""
    n, s = moments["n"], moments["s"]
    if not (pa.types.is_int64(n.type) and is_wide(s.type)):
        return None
    return Wide.of(s).array(s.type, valid=n.to_numpy() != 0)


def exact_average(moments: Mapping[str, pa.Array]) -> pa.Array | None:
    """AVG over exact numbers: ``CAST(sum AS DOUBLE) / count`` as DuckDB computes it (a
    decimal sum converted as its integer, then divided by 10^scale), NULL where no
    value was counted."""
    n, s = moments["n"], moments["s"]
    if not (pa.types.is_int64(n.type) and is_wide(s.type)):
        return None
    counts = n.to_numpy()
    total = Wide.of(s).to_float()
    if pa.types.is_decimal(s.type) and s.type.scale:
        total = total / float(10**s.type.scale)
    valid = counts != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        values = total / np.where(valid, counts, 1)
    return pa.array(values, pa.float64(), mask=~valid)


def boolean(kind: str) -> Callable[[Mapping[str, pa.Array]], pa.Array | None]:
    """BOOL_AND (``kind`` "and") or BOOL_OR ("or") from the counts of true (``t``) and
    false (``f``) values: NULL where there are none."""

    def values(moments: Mapping[str, pa.Array]) -> pa.Array | None:
        t, f = moments["t"], moments["f"]
        if not (pa.types.is_int64(t.type) and pa.types.is_int64(f.type)):
            return None
        trues, falses = t.to_numpy(), f.to_numpy()
        result = falses == 0 if kind == "and" else trues > 0
        return pa.array(result, pa.bool_(), mask=(trues + falses) == 0)

    return values
