"""Required columns: no NULL in a primary key or NOT NULL column."""

from __future__ import annotations

import pyarrow as pa

from ivm.errors import ConstraintError
from ivm.schema import TableSchema


def check_required(zset: pa.Table, table: TableSchema) -> None:
    """Raise ConstraintError if a primary key or NOT NULL column holds NULL.

    Checked on the Z-set, after zero weights are dropped: a row of weight 0 changes
    nothing, so a NULL in it is no violation.
    """
    keys = {name.lower() for name in table.primary_key}
    required = {name.lower() for name in table.required}
    for name in zset.column_names[:-1]:
        nulls = zset.column(name).null_count
        if name.lower() in required and nulls:
            what = "part of the primary key" if name.lower() in keys else "NOT NULL"
            raise ConstraintError(
                f"table {table.name!r}: column {name!r} is {what}, but {nulls} row(s) "
                "of the batch hold NULL in it"
            )
