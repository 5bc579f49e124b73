"""Resolve names: run the optimizer rules (``qualify``…) over the parsed query.

sqlglot reports a name it cannot resolve as an ``OptimizeError`` whose text
ends with the line and *end* column of the offending identifier; this module
finds that identifier again and reports it from its first character, in the
user's script.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError

from ivm.errors import SqlError, UnsupportedSQL
from ivm.schema import Schema
from ivm.sql_frontend.positions import Locator
from ivm.sql_frontend.rules import apply_rules

_POSITION = re.compile(r"\.?\s*Line: (\d+), Col: (\d+)\.?\s*$")
_NAME = re.compile(r"'([^']*)'|: (\w+)$")


def resolve(
    tree: exp.Expression, relations: Mapping[str, Schema], locator: Locator
) -> exp.Expression:
    """``tree`` (a parsed query over ``relations``) with every name resolved."""
    schema = {schema_key(name): {schema_key(c.name): c.type for c in s.columns}
              for name, s in relations.items()}
    try:
        return apply_rules(
            tree,
            schema=schema,
            dialect="duckdb",
            quote_identifiers=False,
            validate_qualify_columns=True,
        )
    except (OptimizeError, SqlglotError) as error:
        message, node = _located(str(error), tree)
        sources = _ambiguous(node, relations)
        if node is not None and len(sources) > 1:
            name = node.name if isinstance(node, exp.Column) else node.sql()
            raise SqlError(
                f"{locator.describe(f'column {name!r}', node)} is ambiguous: "
                f"{' and '.join(sources)} both have it; qualify it ({sources[0]}.{name})"
            ) from error
        raise SqlError(f"cannot resolve {locator.describe(message, node)}") from error
    except AssertionError as error:  # sqlglot's own checks of shapes it does not expect
        construct = locator.describe("query", tree)
        raise UnsupportedSQL(
            f"{construct} is not supported: its names could not be resolved (a shape "
            "sqlglot's qualify does not expect)"
        ) from error


def schema_key(name: str) -> str:
    """``name`` as sqlglot's schema reads it back unchanged: sqlglot parses a schema's
    names as SQL, so one holding ``;``, ``--`` or outer spaces would name something else
    (``'x--y'`` reads as ``x``); those are given quoted (their case then kept)."""
    try:
        if exp.parse_identifier(name, dialect="duckdb").name.lower() == name.lower():
            return name
    except SqlglotError:
        pass
    return '"' + name.replace('"', '""') + '"'


def _located(message: str, tree: exp.Expression) -> tuple[str, exp.Expression | None]:
    """sqlglot's message without its position, and the node it is about."""
    position = _POSITION.search(message)
    text = message[: position.start()] if position else message
    if position:
        line, column = int(position[1]), int(position[2])
        for identifier in tree.find_all(exp.Identifier):
            meta = identifier._meta  # noqa: SLF001 - sqlglot's position record
            if meta and meta.get("line") == line and meta.get("col") == column:
                return text, _column_of(identifier)
    named = _NAME.search(text)
    name = (named[1] or named[2]) if named else None
    if name:
        for identifier in tree.find_all(exp.Identifier):
            if identifier.name == name:
                return text, _column_of(identifier)
    return text, None


def _ambiguous(node: exp.Expression | None, relations: Mapping[str, Schema]) -> list[str]:
    """The tables (by name or alias) of the node's SELECT that all have the unqualified
    column ``node`` names: two or more make it ambiguous, not unknown."""
    if not isinstance(node, exp.Column) or node.table:
        return []
    select = node.find_ancestor(exp.Select)
    if select is None:
        return []
    from_ = select.args.get("from") or select.args.get("from_")
    tables = [from_.this] if from_ is not None else []
    tables += [join.this for join in select.args.get("joins") or []]
    folded = {n.lower(): s for n, s in relations.items()}
    having = []
    for table in tables:
        schema = folded.get(table.name.lower()) if isinstance(table, exp.Table) else None
        if schema is not None and node.name.lower() in {c.lower() for c in schema.names}:
            having.append(table.alias_or_name)
    return having


def _column_of(identifier: exp.Identifier) -> exp.Expression:
    """The whole column reference (``o.x`` from its first character) an identifier names."""
    parent = identifier.parent
    return parent if isinstance(parent, exp.Column) else identifier
