"""Split a SQL script into the DDL statements ivm understands.

CREATE TABLE (columns with DuckDB types, PRIMARY KEY, NOT NULL), CREATE
[MATERIALIZED] VIEW, DROP VIEW and DROP TABLE. Anything else is refused with
``UnsupportedSQL`` naming the statement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sqlglot
from ivm.sql_frontend.positions import describe as at
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from ivm.errors import SqlError, UnsupportedSQL
from ivm.schema import WEIGHT, Column, Schema, TableSchema


@dataclass(frozen=True)
class CreateTable:
    """CREATE TABLE: the table's schema and constraints."""

    table: TableSchema
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateView:
    """CREATE [MATERIALIZED] VIEW name AS query."""

    name: str
    query: exp.Expression
    sql: str
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class Drop:
    """DROP TABLE or DROP VIEW."""

    kind: str  # "TABLE" or "VIEW"
    name: str
    if_exists: bool = False


Statement = CreateTable | CreateView | Drop

RESERVED_PREFIX = "__ivm_"
"""Names of ivm's own tables start with this; user tables and views may not."""


def parse_script(sql: str) -> list[Statement]:
    """Parse one or more ``;``-separated statements."""
    try:
        statements = []
        for text in _split(sql):
            tree = sqlglot.parse_one(text, read="duckdb")
            statement = _statement(tree)
            if isinstance(statement, CreateView):
                # Keep the user's own text: DuckDB names unaliased columns after it.
                statement = dataclasses.replace(statement, sql=_query_text(text))
            statements.append(statement)
    except SqlglotError as error:
        raise SqlError(f"cannot parse SQL: {error}") from error
    return statements


def _split(script: str) -> list[str]:
    """The text of each statement of ``script``, split at top-level semicolons."""
    tokens = DuckDB().tokenize(script)
    pieces: list[str] = []
    first: int | None = None
    previous_end = 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if first is not None:
                pieces.append(script[first : previous_end + 1])
            first = None
            continue
        if first is None:
            first = token.start
        previous_end = token.end
    if first is not None:
        pieces.append(script[first : previous_end + 1])
    return pieces


def _query_text(create_view: str) -> str:
    """The query of a CREATE VIEW statement: the text after its first top-level AS."""
    for token in DuckDB().tokenize(create_view):
        if token.token_type == TokenType.ALIAS:
            return create_view[token.end + 1 :].strip()
    raise SqlError("CREATE VIEW needs AS followed by a query")


def _statement(tree: exp.Expression) -> Statement:
    if isinstance(tree, exp.Command):
        # sqlglot's fallback for text it cannot parse.
        raise SqlError(f"cannot parse SQL: {tree.sql(dialect='duckdb')[:200]}")
    if isinstance(tree, exp.Create):
        kind = (tree.args.get("kind") or "").upper()
        if kind == "TABLE":
            return _create_table(tree)
        if kind == "VIEW":
            return _create_view(tree)
        raise UnsupportedSQL(f"{at('CREATE ' + kind, tree)} is not supported")
    if isinstance(tree, exp.Drop):
        kind = (tree.args.get("kind") or "").upper()
        if kind not in ("TABLE", "VIEW"):
            raise UnsupportedSQL(f"{at('DROP ' + kind, tree)} is not supported")
        tables = tree.args.get("tables") or ([tree.this] if tree.this is not None else [])
        if len(tables) != 1:
            raise UnsupportedSQL(f"{at('DROP of several objects', tree)} is not supported")
        return Drop(kind=kind, name=_name(tables[0]), if_exists=bool(tree.args.get("exists")))
    raise UnsupportedSQL(
        f"{at(tree.key.upper() + ' statement', tree)} is not supported: "
        "use CREATE TABLE, CREATE VIEW, DROP; change data with ingest()"
    )


def _name(table: exp.Expression) -> str:
    if not isinstance(table, exp.Table) or table.args.get("db") or table.args.get("catalog"):
        raise UnsupportedSQL(f"{at('qualified name', table)} is not supported: use a plain name")
    if table.name.lower().startswith(RESERVED_PREFIX):
        raise SqlError(f"names starting with {RESERVED_PREFIX!r} are reserved for ivm's state")
    return table.name


def _create_view(tree: exp.Create) -> CreateView:
    query = tree.expression
    if query is None:
        raise SqlError(f"{at('CREATE VIEW', tree)} needs AS followed by a query")
    target = tree.this
    if isinstance(target, exp.Schema):
        raise UnsupportedSQL(f"{at('view column list', target)} is not supported: use aliases")
    return CreateView(
        name=_name(target),
        query=query,
        sql=query.sql(dialect="duckdb"),
        or_replace=bool(tree.args.get("replace")),
        if_not_exists=bool(tree.args.get("exists")),
    )


def _create_table(tree: exp.Create) -> CreateTable:
    target = tree.this
    if tree.expression is not None or not isinstance(target, exp.Schema):
        raise UnsupportedSQL(f"{at('CREATE TABLE AS', tree)} is not supported: list the columns")
    name = _name(target.this)
    columns: list[Column] = []
    primary_key: tuple[str, ...] = ()
    not_null: set[str] = set()
    for item in target.expressions:
        if isinstance(item, exp.ColumnDef):
            column = item.name
            if column == WEIGHT:
                raise SqlError(f"column name {WEIGHT!r} is reserved for weights")
            kind = item.args.get("kind")
            if kind is None:
                raise SqlError(f"{at('column ' + repr(column), item)} needs a type")
            columns.append(Column(column, kind.sql(dialect="duckdb")))
            for constraint in item.args.get("constraints") or []:
                what = constraint.args.get("kind")
                if isinstance(what, exp.PrimaryKeyColumnConstraint):
                    if primary_key:
                        raise SqlError(f"table {name!r} has more than one PRIMARY KEY")
                    primary_key = (column,)
                elif isinstance(what, exp.NotNullColumnConstraint) and not what.args.get(
                    "allow_null"
                ):
                    not_null.add(column)
                else:
                    raise UnsupportedSQL(
                        f"{at('column constraint', constraint)} is not supported: "
                        "only PRIMARY KEY and NOT NULL"
                    )
        elif isinstance(item, exp.PrimaryKey):
            if primary_key:
                raise SqlError(f"table {name!r} has more than one PRIMARY KEY")
            primary_key = tuple(e.name for e in item.expressions)
        else:
            raise UnsupportedSQL(
                f"{at('table constraint', item)} is not supported: only PRIMARY KEY"
            )
    names = [c.name for c in columns]
    if len(set(n.lower() for n in names)) != len(names):
        raise SqlError(f"table {name!r} has duplicate column names")
    by_lower = {n.lower(): n for n in names}
    for key in primary_key:
        if key.lower() not in by_lower:
            raise SqlError(f"PRIMARY KEY column {key!r} is not a column of {name!r}")
    primary_key = tuple(by_lower[k.lower()] for k in primary_key)
    table = TableSchema(name, Schema(tuple(columns)), primary_key, frozenset(not_null))
    return CreateTable(table=table, if_not_exists=bool(tree.args.get("exists")))
