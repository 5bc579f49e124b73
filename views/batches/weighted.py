"""Weighted rows: an integer ``__w`` per row, positive to insert, negative to delete."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm.errors import SchemaError
from ivm.schema import WEIGHT, TableSchema
from ivm.views.batches.columns import conform
from ivm.views.batches.problems import ARROW_ERRORS, fail_at_first
from ivm.views.batches.zsets import zset


def read_weighted(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """Rows with the weight given in ``__w``; weight 0 rows dropped."""
    weights = _weights(data.column(WEIGHT), context)
    columns = conform(data, table, schema, frozenset({WEIGHT}), context)
    result = zset(columns, weights, schema)
    zero = pc.equal(weights, 0)
    return result.filter(pc.invert(zero)) if pc.any(zero).as_py() else result


def _weights(values: pa.ChunkedArray, context: str) -> pa.ChunkedArray:
    """The ``__w`` column as int64, rejecting non-integer and NULL weights."""
    if pa.types.is_dictionary(values.type):
        values = pc.cast(values, values.type.value_type)
    if not (pa.types.is_integer(values.type) or pa.types.is_null(values.type)):
        raise SchemaError(
            f"{context}: weight column {WEIGHT!r} has type {values.type}; weights are integers"
        )
    fail_at_first(
        pc.is_null(values), lambda i: f"{context}: row {i} of the batch has a NULL weight"
    )
    try:
        weights = pc.cast(values, pa.int64(), safe=True)
    except ARROW_ERRORS as exc:
        raise SchemaError(
            f"{context}: weight column {WEIGHT!r} does not fit int64: {exc}"
        ) from None
    # Equal rows' weights are summed in int64: their total must fit it (a float sum of
    # magnitudes is exact enough to tell).
    if (pc.sum(pc.abs(pc.cast(weights, pa.float64(), safe=False))).as_py() or 0) >= 2.0**63:
        raise SchemaError(
            f"{context}: the weights of column {WEIGHT!r} add up past the int64 range "
            "(a batch's weights may sum to at most 2^63 - 1 in magnitude)"
        )
    return weights
