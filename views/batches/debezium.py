"""Debezium envelope: ``op`` with ``before``/``after`` structs.

``c``/``r`` insert ``after``, ``d`` deletes ``before``, ``u`` deletes ``before`` then
inserts ``after``; other envelope columns (``source``, ``ts_ms``…) are ignored.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm.errors import SchemaError
from ivm.schema import TableSchema
from ivm.views.batches.columns import conform
from ivm.views.batches.formats import (
    DEBEZIUM_AFTER,
    DEBEZIUM_BEFORE,
    DEBEZIUM_DELETES,
    DEBEZIUM_INSERTS,
    DEBEZIUM_OP,
    control_strings,
)
from ivm.views.batches.kinds import without_views
from ivm.views.batches.problems import fail_at_first, show
from ivm.views.batches.reading import check_unique
from ivm.views.batches.zsets import empty_columns, empty_zset, zset


def read_debezium(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """A Debezium envelope: deletes from ``before``, inserts from ``after``, by ``op``."""
    op = control_strings(data.column(DEBEZIUM_OP), DEBEZIUM_OP, context)
    known = pc.is_in(op, value_set=pa.array(DEBEZIUM_DELETES + DEBEZIUM_INSERTS))
    fail_at_first(
        pc.invert(known),
        lambda i: (
            f"{context}: Debezium row {i} has unknown op {show(op[i])}; expected c, r, u or d"
        ),
    )
    sides = [
        _side(data, op, DEBEZIUM_BEFORE, DEBEZIUM_DELETES, table, schema, context),
        _side(data, op, DEBEZIUM_AFTER, DEBEZIUM_INSERTS, table, schema, context),
    ]
    parts = []
    order_keys = []
    for (columns, positions), weight, offset in zip(sides, (-1, 1), (0, 1), strict=True):
        if len(positions):
            parts.append(zset(columns, pa.repeat(weight, len(positions)), schema))
            # Row i's delete sorts at 2i, its insert at 2i + 1: input order, delete first.
            order_keys.append(pc.add(pc.multiply(positions, 2), offset))
    if not parts:
        return empty_zset(schema)
    if len(parts) == 1:
        return parts[0]
    order = pc.sort_indices(pa.concat_arrays(order_keys))
    return pa.concat_tables(parts).take(order)


def _side(
    data: pa.Table,
    op: pa.ChunkedArray,
    side: str,
    ops: tuple[str, ...],
    table: TableSchema,
    schema: pa.Schema,
    context: str,
) -> tuple[list[pa.ChunkedArray], pa.Array]:
    """The table rows in struct column `side` for the rows whose op is in `ops`,
    with those rows' positions in the batch."""
    positions = pc.indices_nonzero(pc.is_in(op, value_set=pa.array(ops)))
    structs = data.column(side) if side in data.column_names else None
    if structs is not None and not (
        pa.types.is_struct(structs.type) or pa.types.is_null(structs.type)
    ):
        raise SchemaError(
            f"{context}: Debezium column {side!r} has type {structs.type}; "
            "expected a struct of the table's columns"
        )

    def absent(i: int) -> str:
        row = positions[i].as_py()
        return f"{context}: Debezium row {row} (op {show(op[row])}) has no {side!r} row"

    if structs is None or pa.types.is_null(structs.type):
        fail_at_first(pa.repeat(True, len(positions)), absent)
        return empty_columns(schema), positions
    rows = _take_structs(structs, positions)
    fail_at_first(pc.is_null(rows), absent)
    flat = pa.Table.from_struct_array(rows)
    check_unique(flat.column_names, f"{context}, Debezium {side!r} struct")
    columns = conform(flat, table, schema, frozenset(), f"{context}, Debezium {side!r} struct")
    return columns, positions


def _take_structs(structs: pa.ChunkedArray, positions: pa.Array) -> pa.ChunkedArray:
    """The struct rows at `positions`, with view-typed fields made plain so take works."""
    plain = without_views(structs.type)
    if plain != structs.type:
        structs = pc.cast(structs, plain)
    return structs.take(positions)
