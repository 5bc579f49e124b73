"""What a session knows of its tables and views, and the read-only listings users get.

``ViewDef`` is the session's own record of a maintained view (its plan and
circuit). ``TableInfo`` and ``ViewInfo`` are what ``db.tables`` and ``db.views``
show: name, columns with DuckDB types (and as an Arrow schema), and the SQL
that defines each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

from ivm.circuit.circuit import Circuit
from ivm.plan.node import Plan
from ivm.schema import Schema, TableSchema, quote


@dataclass(frozen=True)
class ViewDef:
    """A maintained view: its SQL, plan, circuit and output schema."""

    name: str
    sql: str
    plan: Plan
    circuit: Circuit
    schema: Schema

    @cached_property
    def sources(self) -> frozenset[str]:
        """Tables and views the view reads directly (asked every epoch: kept)."""
        return frozenset(self.circuit.sources())


@dataclass(frozen=True)
class TableInfo:
    """A base table as ``db.tables`` lists it."""

    name: str
    columns: tuple[tuple[str, str], ...]
    """(name, DuckDB type) of each column, in order."""
    primary_key: tuple[str, ...]
    sql: str
    """A CREATE TABLE statement that defines the table."""
    arrow_schema: pa.Schema = field(repr=False)


@dataclass(frozen=True)
class ViewInfo:
    """A maintained view as ``db.views`` lists it."""

    name: str
    columns: tuple[tuple[str, str], ...]
    """(name, DuckDB type) of each column, in order."""
    sql: str
    """The view's query, as it was given."""
    sources: tuple[str, ...]
    """The tables and views it reads directly."""
    arrow_schema: pa.Schema = field(repr=False)


def table_info(table: TableSchema, arrow: pa.Schema) -> TableInfo:
    """The listing of a base table."""
    return TableInfo(
        name=table.name,
        columns=tuple((c.name, c.type) for c in table.schema.columns),
        primary_key=table.primary_key,
        sql=create_table_sql(table),
        arrow_schema=arrow,
    )


def view_info(view: ViewDef, arrow: pa.Schema) -> ViewInfo:
    """The listing of a view."""
    return ViewInfo(
        name=view.name,
        columns=tuple((c.name, c.type) for c in view.schema.columns),
        sql=view.sql,
        sources=tuple(sorted(view.sources)),
        arrow_schema=arrow,
    )


def create_table_sql(table: TableSchema) -> str:
    """A CREATE TABLE statement for ``table`` (DuckDB's spelling of the types)."""
    columns = []
    for column in table.schema.columns:
        required = column.name in table.not_null and column.name not in table.primary_key
        columns.append(f"{quote(column.name)} {column.type}" + (" NOT NULL" if required else ""))
    if table.primary_key:
        columns.append(f"PRIMARY KEY ({', '.join(quote(k) for k in table.primary_key)})")
    return f"CREATE TABLE {quote(table.name)} ({', '.join(columns)})"
