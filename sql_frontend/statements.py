"""Split a SQL script into the DDL statements ivm understands.

CREATE TABLE (columns with DuckDB types, PRIMARY KEY, NOT NULL), CREATE
[MATERIALIZED] VIEW, DROP VIEW, DROP TABLE, ALTER TABLE … ADD / DROP / RENAME
COLUMN and REFRESH [MATERIALIZED] VIEW (a no-op). Anything else is refused with
``UnsupportedSQL`` naming the statement. The script is tokenized once; every
position in an error is a line and column of the whole script, and each view
remembers where its query's text starts in it (``CreateView.origin``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import duckdb
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from ivm.errors import SqlError, UnsupportedSQL
from ivm.schema import WEIGHT, Column, Schema, TableSchema
from ivm.sql_frontend.identifiers import RESERVED_PREFIX, check_identifiers, not_reserved
from ivm.sql_frontend.parsing import parse_tokens, quiet, tokenize
from ivm.sql_frontend.positions import TEXT_START, Locator, Origin
from ivm.sql_frontend.refused_statements import (
    UNSUPPORTED_HINT,
    command_error,
    query_start,
    refused_statement,
)


@dataclass(frozen=True)
class CreateTable:
    """CREATE [OR REPLACE] TABLE: the table's schema and constraints."""

    table: TableSchema
    if_not_exists: bool = False
    or_replace: bool = False


@dataclass(frozen=True)
class CreateView:
    """CREATE [MATERIALIZED] VIEW name AS query.

    ``sql`` is the query's own text as the user wrote it (DuckDB names unaliased
    columns after it); ``origin`` is where that text starts in the script, to be
    passed to ``plan_query(..., origin=...)`` so errors point into the script.
    """

    name: str
    query: exp.Expression
    sql: str
    or_replace: bool = False
    if_not_exists: bool = False
    origin: Origin = TEXT_START


@dataclass(frozen=True)
class Drop:
    """DROP TABLE or DROP VIEW; with ``cascade`` the views reading it are dropped too."""

    kind: str  # "TABLE" or "VIEW"
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True)
class AlterTable:
    """ALTER TABLE name ADD [COLUMN] c TYPE, DROP [COLUMN] c, or RENAME [COLUMN] c TO d."""

    name: str
    action: str  # "add", "drop" or "rename"
    column: str
    type: str | None = None  # ADD: the new column's DuckDB type
    new_name: str | None = None  # RENAME: the column's new name
    where: str = ""  # the action's place in the script, for errors


@dataclass(frozen=True)
class Refresh:
    """REFRESH [MATERIALIZED] VIEW name: nothing to do, ivm's views are always fresh."""

    name: str


Statement = CreateTable | CreateView | Drop | AlterTable | Refresh

"""Names of ivm's own tables start with this; user tables and views may not."""


@functools.cache
def duckdb_keywords() -> frozenset[str]:
    """DuckDB's keywords that cannot name a table unquoted (reserved, and those it reads
    as part of a join or a type: ``semi``, ``asof``…)."""
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT keyword_name FROM duckdb_keywords() "
            "WHERE keyword_category IN ('reserved', 'type_function')"
        ).fetchall()
    finally:
        con.close()
    return frozenset(str(r[0]).lower() for r in rows)


def parse_script(sql: str) -> list[Statement]:
    """Parse one or more ``;``-separated statements."""
    if not isinstance(sql, str):
        raise SqlError(f"SQL is text, not {type(sql).__name__}")
    with quiet():
        tokens = tokenize(sql)
        locator = Locator(sql, tokens=tokens)
        statements: list[Statement] = []
        for piece in _split(tokens):
            if piece and piece[0].text.upper() == "REFRESH":
                statements.append(_refresh(piece, sql, locator))
                continue
            other = refused_statement(piece, sql, locator)
            if other is not None:
                raise other
            tree = parse_tokens(piece, sql)
            if isinstance(tree, exp.Command):
                raise command_error(tree, piece, sql, locator)
            check_identifiers(tree, locator)
            statements.append(_Statement(sql, piece, locator).read(tree))
    return statements


def _refresh(tokens: list[Token], sql: str, locator: Locator) -> Refresh:
    """``REFRESH [MATERIALIZED] VIEW name`` (the only REFRESH there is)."""
    words = [t.text for t in tokens]
    upper = [w.upper() for w in words]
    if upper[1:2] == ["MATERIALIZED"]:
        words, upper = words[1:], upper[1:]
    if len(words) != 3 or upper[1] != "VIEW":
        where = locator.position(tokens[0].start)
        text = sql[tokens[0].start : tokens[-1].end + 1][:80]
        raise UnsupportedSQL(f"REFRESH (at {where}: {text}) is not supported: only REFRESH "
                             "[MATERIALIZED] VIEW name is accepted")
    return Refresh(words[2].strip('"'))


def _split(tokens: list[Token]) -> list[list[Token]]:
    """The tokens of each statement, split at top-level semicolons."""
    pieces: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            pieces.append([])
        else:
            pieces[-1].append(token)
    return [p for p in pieces if p]


class _Statement:
    """Reads one parsed statement of the script into a ``Statement``."""

    def __init__(self, sql: str, tokens: list[Token], locator: Locator) -> None:
        self.sql = sql
        self.tokens = tokens
        self.locator = locator

    def at(self, construct: str, node: exp.Expression | None) -> str:
        return self.locator.describe(construct, node)

    def read(self, tree: exp.Expression) -> Statement:
        if isinstance(tree, exp.Create):
            kind = (tree.args.get("kind") or "").upper()
            properties = tree.args.get("properties")
            if properties is not None and properties.find(exp.TemporaryProperty):
                raise UnsupportedSQL(
                    f"{self.at('CREATE TEMPORARY ' + kind, tree)} is not supported: ivm's "
                    "tables and views are kept in its state; create a plain one (and drop it)"
                )
            if kind == "TABLE":
                return self.create_table(tree)
            if kind == "VIEW":
                return self.create_view(tree)
            raise UnsupportedSQL(f"{self.at('CREATE ' + kind, tree)} is not supported")
        if isinstance(tree, exp.Drop):
            kind = (tree.args.get("kind") or "").upper()
            if kind not in ("TABLE", "VIEW"):
                raise UnsupportedSQL(f"{self.at('DROP ' + kind, tree)} is not supported")
            tables = tree.args.get("tables") or ([tree.this] if tree.this is not None else [])
            if len(tables) != 1:
                raise UnsupportedSQL(f"{self.at('DROP of several objects', tree)} is not supported")
            exists = bool(tree.args.get("exists"))
            return Drop(
                kind=kind,
                name=self.name(tables[0]),
                if_exists=exists,
                cascade=bool(tree.args.get("cascade")),
            )
        if isinstance(tree, exp.Alter) and (tree.args.get("kind") or "").upper() == "TABLE":
            return self.alter_table(tree)
        name = "TRUNCATE" if isinstance(tree, exp.TruncateTable) else tree.key.upper()
        raise UnsupportedSQL(
            f"{self.at(name + ' statement', tree)} is not supported: {UNSUPPORTED_HINT}"
        )

    def alter_table(self, tree: exp.Alter) -> AlterTable:
        """One ADD, DROP or RENAME COLUMN action of ALTER TABLE."""
        name = self.name(tree.this)
        actions = tree.args.get("actions") or []
        if len(actions) != 1:
            raise UnsupportedSQL(
                f"{self.at('ALTER TABLE with several actions', tree)} is not supported: "
                "one action per statement"
            )
        action = actions[0]
        where = self.at("ALTER TABLE " + name, action)
        if isinstance(action, exp.ColumnDef):
            kind = action.args.get("kind")
            if kind is None:
                raise SqlError(f"{self.at('column ' + repr(action.name), action)} needs a type")
            if action.args.get("constraints"):
                raise UnsupportedSQL(
                    f"{self.at('constraint of an added column', action)} is not supported: "
                    "the rows already there hold NULL in it; add the column plainly"
                )
            if action.name == WEIGHT:
                raise SqlError(f"{where}: column name {WEIGHT!r} is reserved for weights")
            not_reserved(action.name, action, self.locator)
            return AlterTable(name, "add", action.name, kind.sql(dialect="duckdb"), where=where)
        if isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
            columns = action.args.get("tables") or []
            if len(columns) != 1:
                raise UnsupportedSQL(f"{where}: drop one column per statement")
            return AlterTable(name, "drop", columns[0].name, where=where)
        if isinstance(action, exp.Command) and str(action.this).upper() == "DROP":
            column = str(action.args.get("expression") or "").strip()  # DROP c, no COLUMN
            if column.replace("_", "a").isalnum():
                return AlterTable(name, "drop", column, where=where)
        if isinstance(action, exp.RenameColumn):
            not_reserved(action.args["to"].name, action.args["to"], self.locator)
            return AlterTable(
                name, "rename", action.this.name, new_name=action.args["to"].name, where=where
            )
        raise UnsupportedSQL(
            f"{where}: this action is not supported: ADD COLUMN, DROP COLUMN and RENAME "
            "COLUMN a TO b are"
        )

    def name(self, table: exp.Expression) -> str:
        if not isinstance(table, exp.Table) or table.args.get("db") or table.args.get("catalog"):
            raise UnsupportedSQL(
                f"{self.at('qualified name', table)} is not supported: use a plain name"
            )
        if table.name.lower().startswith(RESERVED_PREFIX):
            raise SqlError(
                f"{self.at('name ' + repr(table.name), table)}: names starting with "
                f"{RESERVED_PREFIX!r} are reserved for ivm's state"
            )
        return table.name

    def new_name(self, target: exp.Expression) -> str:
        """A name CREATE gives: a plain name, not one of DuckDB's keywords unquoted (every
        query would have to quote it, and one that does not fails in DuckDB)."""
        name = self.name(target)
        identifier = target.this if isinstance(target, exp.Table) else None
        quoted = isinstance(identifier, exp.Identifier) and identifier.args.get("quoted")
        if not quoted and name.lower() in duckdb_keywords():
            raise SqlError(
                f"{self.at('name ' + repr(name), target)}: {name!r} is a keyword of DuckDB's "
                f"SQL, so every query would have to quote it; choose another name, or create "
                f'it quoted ("{name}") and quote it wherever you read it'
            )
        return name

    def create_view(self, tree: exp.Create) -> CreateView:
        query = tree.expression
        start = query_start(self.tokens)
        if query is None or start is None:
            raise SqlError(f"{self.at('CREATE VIEW', tree)} needs AS followed by a query")
        target = tree.this
        if isinstance(target, exp.Schema):
            raise UnsupportedSQL(
                f"{self.at('view column list', target)} is not supported: use aliases"
            )
        # Keep the user's own text: DuckDB names unaliased columns after it.
        begin, end = self.tokens[start].start, self.tokens[-1].end + 1
        return CreateView(
            name=self.new_name(target),
            query=query,
            sql=self.sql[begin:end],
            or_replace=bool(tree.args.get("replace")),
            if_not_exists=bool(tree.args.get("exists")),
            origin=Origin().advance(self.sql, begin),
        )

    def create_table(self, tree: exp.Create) -> CreateTable:
        target = tree.this
        if tree.expression is not None or not isinstance(target, exp.Schema):
            raise UnsupportedSQL(
                f"{self.at('CREATE TABLE AS', tree)} is not supported: list the columns"
            )
        name = self.new_name(target.this)
        columns: list[Column] = []
        primary_key: tuple[str, ...] = ()
        not_null: set[str] = set()
        for item in target.expressions:
            if isinstance(item, exp.ColumnDef):
                column = item.name
                if column == WEIGHT:
                    raise SqlError(
                        f"{self.at('column ' + repr(column), item)}: the name is reserved "
                        "for weights"
                    )
                not_reserved(column, item, self.locator)
                kind = item.args.get("kind")
                if kind is None:
                    raise SqlError(f"{self.at('column ' + repr(column), item)} needs a type")
                columns.append(Column(column, kind.sql(dialect="duckdb")))
                for constraint in item.args.get("constraints") or []:
                    what = constraint.args.get("kind")
                    if isinstance(what, exp.PrimaryKeyColumnConstraint):
                        if primary_key:
                            raise SqlError(
                                f"{self.at('PRIMARY KEY', constraint)}: table {name!r} has "
                                "more than one PRIMARY KEY"
                            )
                        primary_key = (column,)
                    elif isinstance(what, exp.NotNullColumnConstraint) and not what.args.get(
                        "allow_null"
                    ):
                        not_null.add(column)
                    else:
                        raise UnsupportedSQL(
                            f"{self.at('column constraint', constraint)} is not supported: "
                            "only PRIMARY KEY and NOT NULL"
                        )
            elif isinstance(item, exp.PrimaryKey):
                if primary_key:
                    raise SqlError(
                        f"{self.at('PRIMARY KEY', item)}: table {name!r} has more than one "
                        "PRIMARY KEY"
                    )
                primary_key = tuple(e.name for e in item.expressions)
            else:
                raise UnsupportedSQL(
                    f"{self.at('table constraint', item)} is not supported: only PRIMARY KEY"
                )
        if not columns:
            raise SqlError(f"{self.at('CREATE TABLE ' + name, tree)}: a table needs a column")
        by_lower: dict[str, str] = {}
        for item in target.expressions:
            if isinstance(item, exp.ColumnDef):
                if item.name.lower() in by_lower:
                    raise SqlError(
                        f"{self.at('column ' + repr(item.name), item)}: table {name!r} has "
                        "duplicate column names"
                    )
                by_lower[item.name.lower()] = item.name
        for key in primary_key:
            if key.lower() not in by_lower:
                node = next((i for i in target.expressions if isinstance(i, exp.PrimaryKey)),
                            target)
                raise SqlError(
                    f"{self.at('PRIMARY KEY', node)}: column {key!r} is not a column of {name!r}"
                )
        primary_key = tuple(by_lower[k.lower()] for k in primary_key)
        table = TableSchema(name, Schema(tuple(columns)), primary_key, frozenset(not_null))
        return CreateTable(
            table=table,
            if_not_exists=bool(tree.args.get("exists")),
            or_replace=bool(tree.args.get("replace")),
        )


__all__ = [
    "RESERVED_PREFIX",
    "CreateTable",
    "CreateView",
    "Drop",
    "Origin",
    "Statement",
    "parse_script",
]
