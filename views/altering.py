"""ALTER TABLE … ADD / DROP / RENAME COLUMN: the table keeps its rows, its views are planned
again.

The table's trace is altered in place (an added column holds NULL in every row
already there), its reader and catalog entry follow, and the views reading it,
directly or through other views, are dropped and created again from their own
SQL over the new columns, inside the script's transaction: a view that uses a
dropped or renamed column no longer plans, and the statement is refused, naming
it (nothing is changed). A primary-key column cannot be dropped.

In Spark mode the table's rows live in partition files: the table is dropped from the
catalog and added again with its new columns (a new generation of its files), and one
Spark job writes its rows, mapped to the new columns, into them
(``ivm.views.spark.altering``); the old files go once the statement commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ivm import faults
from ivm.errors import IvmError, SqlError
from ivm.execution.embedded import describe
from ivm.plan.sql import W, consolidate_sql
from ivm.schema import Column, Schema, TableSchema, quote
from ivm.sql_frontend.statements import AlterTable
from ivm.storage.traces import create_reader, create_trace
from ivm.views.diagnose import ViewFailed
from ivm.views.modes import spark_mode
from ivm.views.table_codec import table_to_json

if TYPE_CHECKING:
    from ivm.views.session import Session


def alter_table(session: Session, statement: AlterTable) -> None:
    """Apply one ALTER TABLE statement of a DDL script (inside the script's transaction)."""
    name = session._resolve(statement.name)
    if name not in session._tables:
        raise SqlError(f"{statement.where}: no table named {statement.name!r}")
    table = session._tables[name]
    altered, select = _altered(table, statement)
    dependents = session._dependents(name)
    for dependent in reversed(dependents):
        session._remove(dependent.name)
    if spark_mode(session):
        _refilled_in_spark(session, name, altered, select)
    else:
        _rewritten_in_place(session, name, altered, select)
    faults.reached("ddl.altered")
    for dependent in dependents:
        try:
            session._add_view(dependent.name, dependent.sql)
        except ViewFailed:
            raise
        except IvmError as error:
            raise type(error)(
                f"{statement.where}: view {dependent.name!r} reads {name!r} and no longer "
                f"plans over its new columns (drop or replace the view first): {error}"
            ) from error


def _rewritten_in_place(
    session: Session, name: str, altered: TableSchema, select: str
) -> None:
    """Embedded mode: the table's trace rewritten with its new columns, its reader,
    catalog entry and row index following."""
    trace = session._names.relation_trace(name)
    _rewrite_trace(session, trace, altered, select)
    actual = describe(session._con, f"SELECT * EXCLUDE ({W}) FROM {trace}")  # DuckDB's types
    altered = TableSchema(name, actual, altered.primary_key, altered.not_null)
    create_reader(session._con, name, trace, altered.schema.names)
    session._catalog.remove(name)
    session._catalog.add("table", name, table_to_json(altered))
    session._row_indexes.pop(name, None)
    session._register_table(altered)


def _refilled_in_spark(session: Session, name: str, altered: TableSchema, select: str) -> None:
    """Spark mode: the table added again with its new columns (a new generation of its
    partition files), filled from its old files by one Spark job."""
    from ivm.views.spark.altering import old_files, refill_table  # imports pyspark

    engine = session._engine
    files = old_files(engine, name)  # before the catalog names the new generation
    session._remove(name)
    session._add_table(altered)
    refill_table(engine, name, files, select)  # type: ignore[arg-type]


def _rewrite_trace(session: Session, trace: str, altered: TableSchema, select: str) -> None:
    """The trace again with the altered columns (``select``: each from the old trace),
    consolidated, weight last, as every trace keeps it."""
    names = altered.schema.names
    fresh = session._names.scratch(altered.name, "alter", "trace")
    session._con.execute(f"DROP VIEW IF EXISTS {quote(altered.name)}").fetchall()
    create_trace(session._con, fresh, [(c.name, c.type) for c in altered.schema.columns])
    rows = consolidate_sql(f"SELECT {select}, {W} FROM {trace}", names)
    session._con.execute(f"INSERT INTO {fresh} {rows}").fetchall()
    session._con.execute(f"DROP TABLE {trace}").fetchall()
    session._con.execute(f"ALTER TABLE {fresh} RENAME TO {trace}").fetchall()
    session._arrangements.forget(trace)
    session._compactor.forget(trace)


def _altered(table: TableSchema, statement: AlterTable) -> tuple[TableSchema, str]:
    """The table's schema after the statement, and its columns as a select list over the
    old trace."""
    columns = list(table.schema.columns)
    folded = {c.name.lower(): i for i, c in enumerate(columns)}
    where = statement.where
    if statement.action == "add":
        if statement.column.lower() in folded:
            raise SqlError(f"{where}: table {table.name!r} already has a column "
                           f"{columns[folded[statement.column.lower()]].name!r}")
        assert statement.type is not None
        select = ", ".join(
            [quote(c.name) for c in columns]
            + [f"CAST(NULL AS {statement.type}) AS {quote(statement.column)}"]
        )
        columns.append(Column(statement.column, statement.type))
        return _schema(table, columns, table.primary_key, table.not_null), select
    index = folded.get(statement.column.lower())
    if index is None:
        raise SqlError(f"{where}: table {table.name!r} has no column {statement.column!r}")
    old = columns[index].name
    keys = tuple(table.primary_key)
    if statement.action == "drop":
        if old in keys:
            raise SqlError(f"{where}: column {old!r} is part of the primary key of "
                           f"{table.name!r} and cannot be dropped")
        del columns[index]
        not_null = table.not_null - {old}
        select = ", ".join(quote(c.name) for c in columns)
        return _schema(table, columns, keys, not_null), select
    new = statement.new_name
    assert new is not None
    if new.lower() in folded and folded[new.lower()] != index:
        raise SqlError(f"{where}: table {table.name!r} already has a column {new!r}")
    select = ", ".join(
        f"{quote(old)} AS {quote(new)}" if i == index else quote(c.name)
        for i, c in enumerate(columns)
    )
    columns[index] = Column(new, columns[index].type)
    keys = tuple(new if k == old else k for k in keys)
    not_null = frozenset(new if n == old else n for n in table.not_null)
    return _schema(table, columns, keys, not_null), select


def _schema(
    table: TableSchema, columns: list[Column], keys: tuple[str, ...], not_null: frozenset[str]
) -> TableSchema:
    return TableSchema(table.name, Schema(tuple(columns)), keys, frozenset(not_null))
