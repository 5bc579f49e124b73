"""Matching the batch's columns to the table's by name, and casting each to its type."""

from __future__ import annotations

import pyarrow as pa

from ivm.errors import SchemaError
from ivm.schema import TableSchema
from ivm.views.batches.casts import Refused, cast


def conform(
    data: pa.Table,
    table: TableSchema,
    schema: pa.Schema,
    ignored: frozenset[str],
    context: str,
) -> list[pa.ChunkedArray]:
    """The batch's columns matching `schema`'s fields, in its order, cast to its types.

    Columns named in `ignored` (a format's control columns) are skipped; any other
    column that is not the table's is an error.
    """
    sources = _match_columns(data.schema, schema, ignored, table, context)
    columns = []
    for field, source in zip(schema, sources, strict=True):
        values = data.column(source)
        try:
            columns.append(cast(values, field.type))
        except Refused as exc:
            reason = f": {exc}" if str(exc) else ""
            raise SchemaError(
                f"{context}: column {field.name!r} has type {values.type} in the batch, which "
                f"does not cast losslessly to {_declared_type(table, field)} ({field.type})"
                f"{reason}"
            ) from None
    return columns


def _match_columns(
    batch: pa.Schema,
    schema: pa.Schema,
    ignored: frozenset[str],
    table: TableSchema,
    context: str,
) -> list[int]:
    """For each field of `schema`, the index of the batch column that holds it.

    A batch column matches a field of the same name, else one whose name differs
    only in case. Columns in `ignored` are skipped.
    """
    exact = {name: i for i, name in enumerate(schema.names)}
    folded = {name.lower(): i for i, name in enumerate(schema.names)}
    sources: list[list[int]] = [[] for _ in schema.names]
    unknown = []
    for index, name in enumerate(batch.names):
        if name in ignored:
            continue
        target = exact.get(name, folded.get(name.lower()))
        if target is None:
            unknown.append(f"{name!r} ({batch.field(index).type})")
        else:
            sources[target].append(index)
    if unknown:
        raise SchemaError(
            f"{context}: batch column {', '.join(unknown)} is not a column of the table; "
            f"its columns are {', '.join(schema.names)}"
        )
    missing = [
        f"{field.name!r} ({_declared_type(table, field)})"
        for field, found in zip(schema, sources, strict=True)
        if not found
    ]
    if missing:
        raise SchemaError(f"{context}: batch has no column {', '.join(missing)}")
    for field, found in zip(schema, sources, strict=True):
        if len(found) > 1:
            names = " and ".join(repr(batch.names[i]) for i in found)
            raise SchemaError(f"{context}: batch columns {names} both name column {field.name!r}")
    return [found[0] for found in sources]


def _declared_type(table: TableSchema, field: pa.Field) -> str:
    """The DuckDB type the table declares for field, for messages."""
    for column in table.schema.columns:
        if column.name == field.name:
            return column.type
    for column in table.schema.columns:
        if column.name.lower() == field.name.lower():
            return column.type
    return str(field.type)
