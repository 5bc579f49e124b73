"""Relation schemas: column names with DuckDB types, and base-table constraints.

Types are DuckDB type strings (``BIGINT``, ``DECIMAL(12,2)``, ``VARCHAR``…): the
executor renders them into SQL as they are, and DuckDB is the authority on what
they mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ivm.storage.sqltext import WEIGHT, quote

__all__ = ["WEIGHT", "Column", "Schema", "TableSchema", "quote"]


@dataclass(frozen=True)
class Column:
    """One column of a relation."""

    name: str
    type: str


@dataclass(frozen=True)
class Schema:
    """An ordered list of columns with unique names."""

    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        """Column names, in order."""
        return [c.name for c in self.columns]

    def type_of(self, name: str) -> str:
        """The DuckDB type of column ``name``."""
        for column in self.columns:
            if column.name == name:
                return column.type
        raise KeyError(name)

    def __len__(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class TableSchema:
    """A base table: its name, columns and constraints."""

    name: str
    schema: Schema
    primary_key: tuple[str, ...] = ()
    not_null: frozenset[str] = field(default_factory=frozenset)

    @property
    def required(self) -> frozenset[str]:
        """Columns that may never hold NULL (primary key and NOT NULL columns)."""
        return self.not_null | frozenset(self.primary_key)
