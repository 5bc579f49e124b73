"""A view's change appended to its output and fetched in one statement, where nothing else
reads it during the epoch.

A view's change is computed once per epoch, consolidated, appended to the view's output
trace and returned by ``ingest``. The general path keeps it in a scratch table (``CREATE
TEMP TABLE … AS``), because views over the view read it there in the same epoch, and so
do changelogs and streamed loads; the trace's append and the fetch after the commit are
two more statements. A view that none of those read takes the direct path instead: one
``INSERT INTO <output trace> <consolidated change> RETURNING *`` appends the change and
hands it back as Arrow, to be returned after the commit. A scratch table in a
transaction is the dearest of those statements (a catalog entry and its storage), so
the direct path saves two or three statements per view and epoch.

A view takes it when, in an ordinary ingest (not a streamed load, not a replay of a
failed epoch):

* no other view reads it (its change would be read by theirs) and it keeps no
  changelog (which logs the change from SQL);
* its output trace has no arrangement (an arranged trace is appended through
  ``ivm.execution.arrangements``, which keeps the arrangement in step);
* its columns are of types that DuckDB hands to Arrow alike whether or not the epoch
  asks for lossless types (``LOSSLESS_TYPES``; the epoch asks, and ``ingest`` returns
  ordinary Arrow types), or that are converted back (``CONVERTED``: BOOLEAN, HUGEINT);
* the epoch's batches are small (``DIRECT_MAX_ROWS``): the change is fetched before its
  size is checked against the session's memory limit, so only changes that cannot be
  large take this path.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm import faults
from ivm.execution.failures import sql_failure
from ivm.schema import WEIGHT
from ivm.storage.results import fetch_arrow
from ivm.views.definitions import ViewDef

if TYPE_CHECKING:
    from ivm.views.session import Session

DIRECT_MAX_ROWS = 50_000
"""The most rows an epoch's batches may hold for its views to take the direct path."""

LOSSLESS_TYPES = re.compile(
    r"\b(BOOL|BOOLEAN|HUGEINT|UHUGEINT|UUID|BIT|BITSTRING|JSON|TIMETZ)\b"
    r"|(?<![A-Z])TIME WITH TIME ZONE"
)
"""DuckDB types (anywhere in a column's type, nested ones included) that reach Arrow as
other types when lossless conversion is on (BOOLEAN as bool8, HUGEINT as 16 raw bytes…):
a view with such a column takes the general path, unless the column is one that
``ordinary`` converts back (``CONVERTED``)."""

CONVERTED = frozenset({"BOOLEAN", "HUGEINT"})
"""Column types (whole, not nested) whose lossless Arrow ``ordinary`` turns back into the
ordinary one: bool8 (its int8 storage) into bool, HUGEINT (16 bytes, a little-endian
two's-complement integer, as Arrow's decimal128 stores its values) into decimal(38, 0).
SUM of an integer column is a HUGEINT, so most GROUP BY views have one."""

def direct_views(session: Session, batch_rows: int) -> frozenset[str]:
    """The views that may take the direct path this epoch (see the module docstring)."""
    if batch_rows > DIRECT_MAX_ROWS:
        return frozenset()
    read = set().union(*(v.sources for v in session._views.values()))
    logged = set(session._feeds.retained())
    return frozenset(
        name for name, view in session._views.items()
        if name not in read and name not in logged and _plain(view)
        and not session._arrangements.arranged(session._names.relation_trace(name))
    )


def _plain(view: ViewDef) -> bool:
    """Whether every column of the view reaches Arrow alike with lossless types on, or
    is converted back by ``ordinary``."""
    return not any(
        c.type.upper() not in CONVERTED and LOSSLESS_TYPES.search(c.type.upper())
        for c in view.schema.columns
    )


def ordinary(rows: pa.Table) -> pa.Table:
    """``rows`` (fetched with lossless types) with the ordinary Arrow types of their
    ``CONVERTED`` columns, as ``ingest`` returns them."""
    for i, field in enumerate(rows.schema):
        if isinstance(field.type, pa.OpaqueType) and field.type.type_name == "hugeint":
            column = pa.chunked_array([_decimal(c.storage) for c in rows.column(i).chunks],
                                      DECIMAL)
        elif isinstance(field.type, pa.Bool8Type):
            column = pa.chunked_array(
                [pc.not_equal(c.storage, 0) for c in rows.column(i).chunks], pa.bool_()
            )
        else:
            continue
        rows = rows.set_column(i, field.with_type(column.type), column)
    return rows


DECIMAL = pa.decimal128(38, 0)


def _decimal(raw: pa.Array) -> pa.Array:
    """16-byte HUGEINT values as decimal(38, 0): the same bytes."""
    return pa.Array.from_buffers(DECIMAL, len(raw), raw.buffers(), raw.null_count, raw.offset)


def append_returning(session: Session, view: ViewDef, consolidated: str) -> pa.Table:
    """Append the view's consolidated change (SQL, columns then the weight) to its output
    trace; the rows appended, as Arrow. Recorded for compaction as a consolidated append."""
    trace = session._names.relation_trace(view.name)
    faults.reached("trace.append")
    try:
        rows = fetch_arrow(session._con, f"INSERT INTO {trace} {consolidated} RETURNING *")
    except duckdb.Error as error:
        raise sql_failure(error, view.name, "") from error
    faults.reached("trace.appended")
    if rows.num_rows:
        weights = rows.column(WEIGHT).to_numpy()
        retracted = int(np.count_nonzero(weights < 0))
        session._compactor.appended(trace, rows.num_rows, True, retracted)
    return ordinary(rows)
