"""How values of each DuckDB type travel through Spark (Arrow batches between stages).

Spark has no unsigned or 128-bit integers, so some types travel as another
*carrier* type that holds every value exactly (HUGEINT as DECIMAL(38,0),
UBIGINT as DECIMAL(20,0), UINTEGER as BIGINT…). A task casts each column to its
carrier before handing Arrow to Spark, and back to the DuckDB type when it
reads a batch, so DuckDB's semantics hold inside every task.

Lists travel as Spark arrays of their elements' carriers. Types with no
faithful Spark counterpart (structs, maps, fixed-size arrays, intervals, TIME,
UUID…) are refused in Spark mode when a table or view is created.

Inside Spark, internal DataFrames name their columns by position (``c0``, ``c1``,
…, then ``__w``): user names, which may hold any character, appear only in the
catalog-facing schema of a table or view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from ivm.errors import UnsupportedSQL
from ivm.functions.aggregates import decimal_scale
from ivm.schema import WEIGHT, Schema, quote


@dataclass(frozen=True)
class WireType:
    """One DuckDB type on the wire."""

    duckdb: str  # the type as DuckDB spells it
    carrier: str  # DuckDB type of the value while in Spark
    arrow: pa.DataType  # Arrow type of the carrier
    spark: str  # Spark SQL type of the carrier (a DDL type name)

    @property
    def numeric(self) -> bool:
        """True for numbers (compared across types by value in DuckDB)."""
        return self.spark in _NUMERIC or self.spark.startswith("decimal")


_NUMERIC = frozenset({"tinyint", "smallint", "int", "bigint", "float", "double"})

_SIMPLE: dict[str, tuple[str, pa.DataType, str]] = {
    "BOOLEAN": ("BOOLEAN", pa.bool_(), "boolean"),
    "TINYINT": ("TINYINT", pa.int8(), "tinyint"),
    "SMALLINT": ("SMALLINT", pa.int16(), "smallint"),
    "INTEGER": ("INTEGER", pa.int32(), "int"),
    "BIGINT": ("BIGINT", pa.int64(), "bigint"),
    "UTINYINT": ("SMALLINT", pa.int16(), "smallint"),
    "USMALLINT": ("INTEGER", pa.int32(), "int"),
    "UINTEGER": ("BIGINT", pa.int64(), "bigint"),
    "UBIGINT": ("DECIMAL(20,0)", pa.decimal128(20, 0), "decimal(20,0)"),
    "HUGEINT": ("DECIMAL(38,0)", pa.decimal128(38, 0), "decimal(38,0)"),
    "FLOAT": ("FLOAT", pa.float32(), "float"),
    "DOUBLE": ("DOUBLE", pa.float64(), "double"),
    "VARCHAR": ("VARCHAR", pa.string(), "string"),
    "BLOB": ("BLOB", pa.binary(), "binary"),
    "DATE": ("DATE", pa.date32(), "date"),
    "TIMESTAMP": ("TIMESTAMP", pa.timestamp("us"), "timestamp_ntz"),
    "TIMESTAMP WITH TIME ZONE": ("TIMESTAMPTZ", pa.timestamp("us", tz="UTC"), "timestamp"),
}


def wire_type(duckdb_type: str) -> WireType:
    """The wire form of a DuckDB type; UnsupportedSQL when Spark cannot carry it exactly."""
    spelled = duckdb_type.upper()
    if spelled in _SIMPLE:
        carrier, arrow, spark = _SIMPLE[spelled]
        return WireType(duckdb_type, carrier, arrow, spark)
    decimal = decimal_scale(spelled)
    if decimal is not None:
        precision, scale = decimal
        spark = f"decimal({precision},{scale})"
        return WireType(duckdb_type, spelled, pa.decimal128(precision, scale), spark)
    if spelled.endswith("[]"):  # a LIST: its elements travel as their own carrier
        try:
            inner = wire_type(duckdb_type[:-2])
        except UnsupportedSQL:
            raise UnsupportedSQL(
                f"type {duckdb_type} cannot travel through Spark exactly: its elements cannot"
            ) from None
        return WireType(
            duckdb_type, f"{inner.carrier}[]", pa.list_(inner.arrow), f"array<{inner.spark}>"
        )
    raise UnsupportedSQL(
        f"type {duckdb_type} cannot travel through Spark exactly; Spark mode supports "
        "booleans, integers, floats, DECIMAL, VARCHAR, BLOB, DATE, TIMESTAMP[TZ] and lists "
        "of them"
    )


def wire_types(schema: Schema, what: str) -> list[WireType]:
    """Wire types of every column of ``schema``; the error names ``what`` and the column."""
    types = []
    for column in schema.columns:
        try:
            types.append(wire_type(column.type))
        except UnsupportedSQL as error:
            raise UnsupportedSQL(f"{what}, column {column.name!r}: {error}") from None
    return types


def positional(count: int) -> list[str]:
    """Column names of an internal DataFrame with ``count`` columns (the weight excluded)."""
    return [f"c{j}" for j in range(count)]


def arrow_schema(schema: Schema) -> pa.Schema:
    """Arrow schema of ``schema``'s rows on the wire: positional names, then the weight."""
    types = wire_types(schema, "a relation")
    fields = [pa.field(f"c{j}", t.arrow) for j, t in enumerate(types)]
    return pa.schema([*fields, pa.field(WEIGHT, pa.int64())])


def to_wire_sql(source: str, schema: Schema, weighted: bool = True) -> str:
    """SQL turning ``source`` (real names, DuckDB types) into wire columns."""
    types = wire_types(schema, "a relation")
    parts = [
        f"CAST({quote(c.name)} AS {t.carrier}) AS c{j}"
        for j, (c, t) in enumerate(zip(schema.columns, types, strict=True))
    ]
    if weighted:
        parts.append(f"CAST({WEIGHT} AS BIGINT) AS {WEIGHT}")
    return f"SELECT {', '.join(parts)} FROM ({source}) AS __wire"


def from_wire_sql(source: str, schema: Schema, names: Sequence[str] | None = None) -> str:
    """SQL turning wire columns (``names``, positional by default) back into ``schema``."""
    names = list(names) if names is not None else positional(len(schema.columns))
    parts = [
        f"CAST({quote(n)} AS {c.type}) AS {quote(c.name)}"
        for n, c in zip(names, schema.columns, strict=True)
    ]
    parts.append(f"CAST({WEIGHT} AS BIGINT) AS {WEIGHT}")
    return f"SELECT {', '.join(parts)} FROM ({source}) AS __wire"


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s field names and types (Spark checks both)."""
    table = table.rename_columns(schema.names)
    return table.cast(schema) if table.schema != schema else table
