"""Reading what the caller passed into one Arrow table: Arrow tables, record batches and
record batch readers, pandas and Polars DataFrames (or anything else speaking Arrow's
PyCapsule stream interface), DuckDB relations, a list of dicts (rows) or a dict of
columns."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

import duckdb
import pyarrow as pa

from ivm.errors import SchemaError
from ivm.views.batches.problems import ARROW_ERRORS


def to_arrow(batch: object, context: str) -> pa.Table:
    """The batch as a pa.Table, with unique column names."""
    if isinstance(batch, pa.Table):
        data = batch
    elif isinstance(batch, pa.RecordBatch):
        data = pa.Table.from_batches([batch])
    elif isinstance(batch, pa.RecordBatchReader):
        data = batch.read_all()
    elif isinstance(batch, list | tuple):
        data = _from_dicts(batch, context)
    elif isinstance(batch, Mapping):
        data = _from_columns(batch, context)
    elif _is_pandas_frame(batch):
        try:
            data = pa.Table.from_pandas(batch, preserve_index=False)
        except ARROW_ERRORS as exc:
            raise SchemaError(f"{context}: cannot convert the DataFrame: {exc}") from None
    elif isinstance(batch, duckdb.DuckDBPyRelation):
        data = batch.to_arrow_table()
    elif hasattr(batch, "__arrow_c_stream__"):  # Polars, and any Arrow PyCapsule producer
        try:
            data = pa.RecordBatchReader.from_stream(batch).read_all()
        except ARROW_ERRORS as exc:
            raise SchemaError(f"{context}: cannot read the {type(batch).__name__}: {exc}") from None
    else:
        raise SchemaError(
            f"{context}: cannot read a batch from {type(batch).__name__}; expected a pyarrow "
            "Table, RecordBatch or RecordBatchReader, a pandas or Polars DataFrame, a DuckDB "
            "relation, a list of dicts (rows) or a dict of columns"
        )
    check_unique(data.column_names, context)
    rows = _row_count(batch)
    if data.num_columns == 0 and rows:  # rows of no columns: still rows, missing every column
        data = pa.table({"": pa.nulls(rows)}).drop([""])
    return data


def _row_count(batch: object) -> int:
    """How many rows a list of dicts or a DataFrame holds, whatever its columns (pyarrow
    gives a table without columns no rows)."""
    if isinstance(batch, list | tuple):
        return len(batch)
    return len(batch) if _is_pandas_frame(batch) else 0


def check_unique(names: Sequence[str], context: str) -> None:
    """Raise SchemaError if a column name appears twice."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SchemaError(f"{context}: batch has two columns named {name!r}")
        seen.add(name)


def _is_pandas_frame(batch: object) -> bool:
    """Whether batch is a pandas DataFrame; pandas is only imported if the caller did."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(batch, pandas.DataFrame)


def _from_columns(columns: Mapping[object, object], context: str) -> pa.Table:
    """A table from a dict of columns, each a sequence of values (or an Arrow array)."""
    for name in columns:
        if not isinstance(name, str):
            raise SchemaError(f"{context}: batch column name {name!r} is not a string")
    try:
        return pa.table(dict(columns))  # type: ignore[arg-type]
    except (*ARROW_ERRORS, OverflowError, TypeError) as exc:
        raise SchemaError(f"{context}: cannot read the dict of columns: {exc}") from None


def _from_dicts(rows: Sequence[object], context: str) -> pa.Table:
    """A table from rows given as dicts that all have the same keys."""
    if not rows:
        return pa.table({})
    keys = _row_keys(rows, context)
    columns = {}
    for key in keys:
        try:
            columns[key] = pa.array([row[key] for row in rows])  # type: ignore[index]
        except (*ARROW_ERRORS, OverflowError) as exc:
            raise SchemaError(f"{context}: cannot read column {key!r} of the rows: {exc}") from None
    return pa.table(columns)


def _row_keys(rows: Sequence[object], context: str) -> list[str]:
    """The keys of the first row, after checking that every row is a dict with those keys.

    pa.Table.from_pylist would silently drop keys missing from the first row and
    fill NULL for keys missing from later rows; here both are errors.
    """
    first = rows[0]
    if not isinstance(first, Mapping):
        raise SchemaError(f"{context}: row 0 of the batch is a {type(first).__name__}, not a dict")
    keys = first.keys()
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise SchemaError(
                f"{context}: row {i} of the batch is a {type(row).__name__}, not a dict"
            )
        if row.keys() != keys:
            missing = sorted(map(str, keys - row.keys()))
            extra = sorted(map(str, row.keys() - keys))
            raise SchemaError(
                f"{context}: row {i} of the batch has different keys from row 0 "
                f"(missing {missing}, extra {extra}); every row must have the same columns"
            )
    names = list(keys)
    for name in names:
        if not isinstance(name, str):
            raise SchemaError(f"{context}: batch column name {name!r} is not a string")
    return names
