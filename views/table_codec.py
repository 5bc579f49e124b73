"""Table definitions as the catalog stores them (JSON text)."""

from __future__ import annotations

import json

from ivm.errors import StateError
from ivm.schema import Column, Schema, TableSchema


def table_to_json(table: TableSchema) -> str:
    """Serialize a table definition for the catalog."""
    return json.dumps(
        {
            "columns": [[c.name, c.type] for c in table.schema.columns],
            "primary_key": list(table.primary_key),
            "not_null": sorted(table.not_null),
        }
    )


def table_from_json(name: str, text: str) -> TableSchema:
    """Read a table definition written by ``table_to_json``."""
    try:
        data = json.loads(text)
        columns = tuple(Column(n, t) for n, t in data["columns"])
        return TableSchema(
            name, Schema(columns), tuple(data["primary_key"]), frozenset(data["not_null"])
        )
    except (ValueError, KeyError, TypeError) as error:
        raise StateError(f"catalog entry of table {name!r} is unreadable: {error}") from error
