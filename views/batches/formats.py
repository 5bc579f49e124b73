"""Change formats: their control columns and codes, and which one a batch follows."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ivm.errors import SchemaError
from ivm.schema import WEIGHT, TableSchema
from ivm.views.batches.kinds import kind

DEBEZIUM_OP = "op"
DEBEZIUM_BEFORE = "before"
DEBEZIUM_AFTER = "after"
DEBEZIUM_DELETES = ("u", "d")
DEBEZIUM_INSERTS = ("c", "r", "u")

DELTA_CHANGE_TYPE = "_change_type"
DELTA_INSERTS = ("insert", "update_postimage")
DELTA_DELETES = ("delete", "update_preimage")
DELTA_METADATA = frozenset({DELTA_CHANGE_TYPE, "_commit_version", "_commit_timestamp"})


def change_format(names: Sequence[str], table: TableSchema) -> str:
    """Which format the batch's columns follow: insert, weighted, debezium or delta.

    A control name that is also a column of the table is read as data.
    """
    table_names = {name.lower() for name in table.schema.names}
    present = {name for name in names if name.lower() not in table_names}
    formats = []
    if WEIGHT in names:
        formats.append("weighted")
    if DEBEZIUM_OP in present and present & {DEBEZIUM_BEFORE, DEBEZIUM_AFTER}:
        formats.append("debezium")
    if DELTA_CHANGE_TYPE in present:
        formats.append("delta")
    if len(formats) > 1:
        raise SchemaError(
            f"table {table.name!r}: batch mixes change formats ({', '.join(formats)}); "
            "use one of __w, Debezium op/before/after or Delta _change_type"
        )
    return formats[0] if formats else "insert"


def control_strings(values: pa.ChunkedArray, name: str, context: str) -> pa.ChunkedArray:
    """A control column (op, _change_type) as plain strings."""
    if pa.types.is_dictionary(values.type):
        values = pc.cast(values, values.type.value_type)
    if not (kind(values.type) == "string" or pa.types.is_null(values.type)):
        raise SchemaError(f"{context}: column {name!r} has type {values.type}; expected strings")
    return pc.cast(values, pa.string())
