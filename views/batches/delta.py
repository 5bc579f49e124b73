"""Delta Lake change data feed: ``_change_type`` says insert (+1) or delete (-1)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm.schema import TableSchema
from ivm.views.batches.columns import conform
from ivm.views.batches.formats import (
    DELTA_CHANGE_TYPE,
    DELTA_DELETES,
    DELTA_INSERTS,
    DELTA_METADATA,
    control_strings,
)
from ivm.views.batches.problems import fail_at_first, show
from ivm.views.batches.zsets import zset


def read_delta(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """A Delta Lake change data feed: weights from ``_change_type``."""
    change = control_strings(data.column(DELTA_CHANGE_TYPE), DELTA_CHANGE_TYPE, context)
    inserts = pc.is_in(change, value_set=pa.array(DELTA_INSERTS))
    deletes = pc.is_in(change, value_set=pa.array(DELTA_DELETES))
    fail_at_first(
        pc.invert(pc.or_(inserts, deletes)),
        lambda i: (
            f"{context}: row {i} of the batch has unknown {DELTA_CHANGE_TYPE} "
            f"{show(change[i])}; expected one of {', '.join(DELTA_INSERTS + DELTA_DELETES)}"
        ),
    )
    weights = pc.cast(pc.if_else(inserts, 1, -1), pa.int64())
    columns = conform(data, table, schema, DELTA_METADATA, context)
    return zset(columns, weights, schema)
