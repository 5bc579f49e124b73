"""Building the result: Z-set tables, the table's columns plus the int64 weight ``__w``."""

from __future__ import annotations

import pyarrow as pa

from ivm.schema import WEIGHT


def with_weight(schema: pa.Schema) -> pa.Schema:
    """schema plus the weight column."""
    return schema.append(pa.field(WEIGHT, pa.int64()))


def zset(
    columns: list[pa.ChunkedArray], weights: pa.Array | pa.ChunkedArray, schema: pa.Schema
) -> pa.Table:
    """A Z-set table from columns matching schema and their weights."""
    if isinstance(weights, pa.Array):
        weights = pa.chunked_array([weights])
    return pa.Table.from_arrays([*columns, weights], schema=with_weight(schema))


def empty_columns(schema: pa.Schema) -> list[pa.ChunkedArray]:
    """No rows, one empty column per field of schema."""
    return [pa.chunked_array([], field.type) for field in schema]


def empty_zset(schema: pa.Schema) -> pa.Table:
    """The Z-set with no rows."""
    return with_weight(schema).empty_table()
