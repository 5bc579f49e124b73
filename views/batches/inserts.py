"""Plain inserts: a batch of only the table's columns inserts every row once."""

from __future__ import annotations

import pyarrow as pa

from ivm.schema import TableSchema
from ivm.views.batches.columns import conform
from ivm.views.batches.zsets import zset


def read_inserts(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """Every row inserted once."""
    columns = conform(data, table, schema, frozenset(), context)
    return zset(columns, pa.repeat(1, data.num_rows), schema)
