"""normalize_batch: read a batch, pick its change format's reader, check and cast the result."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from ivm.schema import TableSchema
from ivm.views.batches.debezium import read_debezium
from ivm.views.batches.delta import read_delta
from ivm.views.batches.formats import change_format
from ivm.views.batches.inserts import read_inserts
from ivm.views.batches.kinds import without_views
from ivm.views.batches.reading import to_arrow
from ivm.views.batches.required import check_required
from ivm.views.batches.weighted import read_weighted
from ivm.views.batches.zsets import empty_zset, with_weight

Reader = Callable[[pa.Table, TableSchema, pa.Schema, str], pa.Table]
"""A change format's reader: (batch, table, work schema, context) -> Z-set."""

READERS: dict[str, Reader] = {
    "insert": read_inserts,
    "weighted": read_weighted,
    "debezium": read_debezium,
    "delta": read_delta,
}
"""The reader of each format that ``formats.change_format`` names."""


def normalize_batch(batch: object, table: TableSchema, arrow_schema: pa.Schema) -> pa.Table:
    """Turn any accepted batch into a Z-set for `table`: exactly the table's columns, in
    arrow_schema's order and types, plus "__w" (int64), one row per input change, rows with
    weight 0 dropped; not consolidated.

    Raises SchemaError for a batch that does not fit the table (missing, unknown or
    lossy columns, bad weights or change codes) and ConstraintError for a NULL in a
    primary key or NOT NULL column.
    """
    context = f"table {table.name!r}"
    data = to_arrow(batch, context)
    # Kernels such as take, filter and is_in lack view-type support: do the work on
    # plain types and cast to arrow_schema's exact types at the end.
    work_schema = pa.schema([pa.field(f.name, without_views(f.type)) for f in arrow_schema])
    if data.num_columns == 0 and data.num_rows == 0:
        zset = empty_zset(work_schema)
    else:
        reader = READERS[change_format(data.column_names, table)]
        zset = reader(data, table, work_schema, context)
    check_required(zset, table)
    return zset.cast(with_weight(arrow_schema))
