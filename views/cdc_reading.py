"""Reading a CDC file of ``ivm run`` with its table's declared column types.

DuckDB's CSV and JSON readers guess each column's type from the values: ``10.25``
becomes DOUBLE (which a DECIMAL column refuses, as a cast that could change values)
and a CSV holding only its header is all VARCHAR. So a CSV or JSON-lines file is read
with the types its table declares, for the columns that are the table's:

* plain rows, weighted rows (``__w``, read as BIGINT) and a Delta change feed
  (``_change_type`` and its other columns keep their own types): the file's columns
  named as the table's columns (exactly, else ignoring case, as ``views.batches``
  matches them);
* Debezium envelopes (``op``, ``before``, ``after``; JSON only): the fields of the
  ``before`` and ``after`` structs named as the table's columns.

The file is read twice: once to check every value against those types, so that a
value that does not fit (``abc`` or ``1e20`` for a DECIMAL(12,2), ``10.255`` too,
which the reader would round) stops the file with a ``SchemaError`` naming the file,
the table and the column before anything is applied; then as the epoch's batch. A
DECIMAL column is read with more decimal places (DECIMAL(38, 38 - integer digits))
and cast to its own type, so rounding is caught. An empty JSON-lines file reads as
no rows of the table's columns. Parquet files carry their types and are read as they
are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ivm.errors import SchemaError
from ivm.execution.failures import duckdb_text
from ivm.schema import WEIGHT, TableSchema, quote
from ivm.views.batches.formats import DEBEZIUM_AFTER, DEBEZIUM_BEFORE, change_format

READERS = {
    ".parquet": "read_parquet",
    ".csv": "read_csv",
    ".json": "read_json",
    ".jsonl": "read_json",
    ".ndjson": "read_json",
}
"""DuckDB's table function reading each kind of CDC file."""

Target = tuple[str, str | None]
"""A value read with a declared type: (the file's column, its struct field or None)."""

_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)", re.IGNORECASE)


@dataclass(frozen=True)
class CdcFile:
    """One CDC file read for ``table``: a relation to ingest and its row count."""

    relation: duckdb.DuckDBPyRelation
    rows: int


@dataclass(frozen=True)
class _Plan:
    """How to read a CSV or JSON file: its columns' types, which of them (or of their
    struct fields) are the table's, and the table column and declared type of each."""

    path: Path
    function: str
    columns: dict[str, str]  # every file column -> the type it is read as (JSON needs all)
    fields: dict[str, list[tuple[str, str]]]  # Debezium struct -> its (field, guessed type)
    targets: dict[Target, tuple[str, str]]  # -> (table column, declared type)


def read_cdc(reader: duckdb.DuckDBPyConnection, path: Path, table: TableSchema) -> CdcFile:
    """``path`` read for ``table`` (see the module docstring); SchemaError if it cannot
    be read or a value does not fit its column's declared type."""
    function = READERS[path.suffix.lower()]
    if function == "read_parquet":
        relation = _sql(reader, path, f"SELECT * FROM read_parquet('{literal(path)}')")
        return CdcFile(relation, _count(reader, path, relation))
    if function == "read_json" and _blank(path):
        columns = ", ".join(f"CAST(NULL AS {c.type}) AS {quote(c.name)}"
                            for c in table.schema.columns)
        return CdcFile(reader.sql(f"SELECT {columns} LIMIT 0"), 0)
    plan = _plan(reader, path, function, table)
    rows = _check(reader, plan, table)
    return CdcFile(_sql(reader, path, _select(plan, plan.targets)), rows)


def _plan(reader: duckdb.DuckDBPyConnection, path: Path, function: str,
          table: TableSchema) -> _Plan:
    """The reading plan of a CSV or JSON file, from the reader's guess of its columns."""
    guessed = _sql(reader, path, f"SELECT * FROM {_call(path, function, {})}")
    declared = {c.name.lower(): c for c in table.schema.columns}
    shape = change_format(guessed.columns, table)
    columns: dict[str, str] = {}
    fields: dict[str, list[tuple[str, str]]] = {}
    targets: dict[Target, tuple[str, str]] = {}
    for name, kind in zip(guessed.columns, guessed.types, strict=True):
        column = declared.get(name.lower())
        columns[name] = "VARCHAR" if kind.id == "null" else str(kind)
        if column is not None:
            targets[(name, None)] = (column.name, column.type)
        elif shape == "weighted" and name == WEIGHT:
            targets[(name, None)] = (name, "BIGINT")
        elif (shape == "debezium" and function == "read_json"
              and name in (DEBEZIUM_BEFORE, DEBEZIUM_AFTER)):
            children = ([(c.name, c.type) for c in table.schema.columns] if kind.id == "null"
                        else list(kind.children) if kind.id == "struct" else None)
            if children is None:
                continue  # not a struct: batches' Debezium reader says what is wrong
            fields[name] = [(field, str(field_kind)) for field, field_kind in children]
            for field, field_kind in children:
                column = declared.get(field.lower())
                targets[(name, field)] = ((column.name, column.type) if column is not None
                                          else (field, str(field_kind)))
    return _Plan(path, function, columns, fields, targets)


def _check(reader: duckdb.DuckDBPyConnection, plan: _Plan, table: TableSchema) -> int:
    """The file's row count, having read every value with its declared type (DECIMAL
    with more places, to see rounding); SchemaError naming the value that does not fit."""
    read = {target: _wide(kind) for target, (_, kind) in plan.targets.items()}
    counts = [f"count({quote(name)})" for name in plan.columns]  # every column converted
    decimals = [t for t in plan.targets if read[t] != plan.targets[t][1]]
    rounded = [f"bool_or({_expr(t)} <> CAST({_expr(t)} AS {plan.targets[t][1]}))"
               for t in decimals]
    query = f"SELECT {', '.join(['count(*)', *counts, *rounded])} FROM {_from(plan, read)}"
    try:
        result = reader.sql(query).fetchall()[0]
    except duckdb.Error as error:
        raise SchemaError(_misfit(reader, plan, table)
                          or f"cannot read CDC file {plan.path}: {duckdb_text(error)}") from None
    for target, lost in zip(decimals, result[1 + len(counts):], strict=True):
        if lost:
            value = reader.sql(
                f"SELECT CAST({_expr(target)} AS VARCHAR) FROM {_from(plan, read)} "
                f"WHERE {_expr(target)} <> CAST({_expr(target)} AS {plan.targets[target][1]}) "
                "LIMIT 1"
            ).fetchall()[0][0]
            value = value.rstrip("0").rstrip(".") if "." in value else value
            raise SchemaError(_refusal(plan, table, target, f"value {value} has more decimal "
                                       f"places than {plan.targets[target][1]} keeps"))
    return int(result[0])


def _misfit(reader: duckdb.DuckDBPyConnection, plan: _Plan, table: TableSchema) -> str | None:
    """Which value of the file does not read as its declared type (each typed value read
    alone, then its text looked at); None if none does (the failure is elsewhere)."""
    for target, (_, kind) in plan.targets.items():
        try:
            reader.sql(f"SELECT count({_expr(target)}) FROM "
                       f"{_from(plan, {target: _wide(kind)})}").fetchall()
            continue
        except duckdb.Error:
            pass
        text = {t: "VARCHAR" for t in plan.targets}
        try:
            found = reader.sql(
                f"SELECT {_expr(target)} FROM {_from(plan, text)} WHERE {_expr(target)} IS NOT "
                f"NULL AND TRY_CAST({_expr(target)} AS {_wide(kind)}) IS NULL LIMIT 1"
            ).fetchall()
        except duckdb.Error:
            found = []
        value = f"value {found[0][0]!r}" if found else "a value"
        return _refusal(plan, table, target, f"{value} does not fit its type {kind}")
    return None


def _refusal(plan: _Plan, table: TableSchema, target: Target, what: str) -> str:
    """The message of a value refused: the file, the table, the column, what is wrong."""
    column, field = target
    name = plan.targets[target][0]
    where = f"column {name!r}" + (f" (in {column!r})" if field is not None else "")
    return f"CDC file {plan.path}: table {table.name!r}, {where}: {what}; nothing was applied"


def _select(plan: _Plan, targets: dict[Target, tuple[str, str]]) -> str:
    """The file as the batch: each typed value in its declared type."""
    read = {target: _wide(kind) for target, (_, kind) in targets.items()}
    items = []
    for name in plan.columns:
        if name in plan.fields:
            kind = _struct(plan, name, {t: k for t, (_, k) in targets.items()})
            items.append(f"CAST({quote(name)} AS {kind}) AS {quote(name)}")
        elif (name, None) in targets and read[(name, None)] != targets[(name, None)][1]:
            items.append(f"CAST({quote(name)} AS {targets[(name, None)][1]}) AS {quote(name)}")
        else:
            items.append(quote(name))
    return f"SELECT {', '.join(items)} FROM {_from(plan, read)}"


def _from(plan: _Plan, types: dict[Target, str]) -> str:
    """The reader's call with ``types`` for the values they name (others as guessed)."""
    if plan.function == "read_csv":
        return _call(plan.path, plan.function, {c: t for (c, _), t in types.items()})
    columns = {}
    for name, kind in plan.columns.items():
        if name in plan.fields:
            columns[name] = _struct(plan, name, types)
        else:
            columns[name] = types.get((name, None), kind)
    return _call(plan.path, plan.function, columns)


def _struct(plan: _Plan, column: str, types: dict[Target, str]) -> str:
    """A Debezium struct column's type: its fields with ``types`` where they name them."""
    kinds = [f"{quote(field)} {types.get((column, field), guessed)}"
             for field, guessed in plan.fields[column]]
    return f"STRUCT({', '.join(kinds)})"


def _call(path: Path, function: str, types: dict[str, str]) -> str:
    """``read_csv(path, header = true, types = {…})`` or ``read_json(path, columns = {…})``."""
    given = ", ".join(f"'{literal(name)}': '{literal(kind)}'" for name, kind in types.items())
    if function == "read_csv":
        return f"read_csv('{literal(path)}', header = true" + (
            f", types = {{{given}}})" if types else ")")
    return f"read_json('{literal(path)}'" + (f", columns = {{{given}}})" if types else ")")


def _expr(target: Target) -> str:
    """A typed value in SQL: the column, or its struct's field."""
    column, field = target
    if field is None:
        return quote(column)
    return f"struct_extract({quote(column)}, '{literal(field)}')"


def _wide(kind: str) -> str:
    """The type a value is read as: a DECIMAL with as many more places as fit (so the
    reader's rounding can be seen), else its declared type."""
    match = _DECIMAL.fullmatch(kind.strip())
    if match is None:
        return kind
    precision, scale = int(match.group(1)), int(match.group(2))
    return f"DECIMAL(38,{38 - (precision - scale)})"


def _sql(reader: duckdb.DuckDBPyConnection, path: Path, query: str) -> duckdb.DuckDBPyRelation:
    try:
        return reader.sql(query)
    except duckdb.Error as error:
        raise SchemaError(f"cannot read CDC file {path}: {duckdb_text(error)}") from None


def _count(reader: duckdb.DuckDBPyConnection, path: Path,
           relation: duckdb.DuckDBPyRelation) -> int:
    try:
        return int(relation.aggregate("count(*)").fetchall()[0][0])
    except duckdb.Error as error:
        raise SchemaError(f"cannot read CDC file {path}: {duckdb_text(error)}") from None


def _blank(path: Path) -> bool:
    """Whether a JSON-lines file holds nothing but white space."""
    with path.open("rb") as file:
        head = file.read(4097)
    return len(head) <= 4096 and not head.strip()


def literal(path: Path | str) -> str:
    """A path or name inside a SQL string literal."""
    return str(path).replace("'", "''")
