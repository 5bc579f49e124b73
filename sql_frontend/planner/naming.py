"""Names: of view columns (as DuckDB names them) and of columns inside a plan."""

from __future__ import annotations

from sqlglot import exp

from ivm.sql_frontend.anchors import meta_start


def unique_names(names: list[str]) -> list[str]:
    """Column names made unique as DuckDB's CREATE VIEW does: a repeat ``k`` becomes ``k_1``."""
    taken: set[str] = set()
    result = []
    for name in names:
        candidate, suffix = name, 0
        while candidate.lower() in taken:
            suffix += 1
            candidate = f"{name}_{suffix}"
        taken.add(candidate.lower())
        result.append(candidate)
    return result


def materialized_type(type_: str) -> str:
    """The type a column gets when stored: an untyped NULL is stored as INTEGER, as DuckDB's
    CREATE TABLE … AS does."""
    return "INTEGER" if type_.strip('"').upper() == "NULL" else type_


def qualified_name(column: exp.Column) -> str:
    """``alias.column`` for a qualified column, the bare name otherwise."""
    return f"{column.table}.{column.name}" if column.table else column.name


def ref(name: str, like: exp.Expression | None = None) -> exp.Column:
    """A reference to column ``name``; it keeps the text position of ``like`` (the
    column it stands for) so errors about it can still point into the user's text."""
    column = exp.Column(this=exp.Identifier(this=name, quoted=True))
    if like is not None:
        positioned = [n for n in like.walk() if meta_start(n) is not None]
        if positioned:
            first = min(positioned, key=lambda n: meta_start(n) or 0)
            column.this.meta.update(first.meta)
    return column


def rename_columns(expression: exp.Expression) -> exp.Expression:
    """Replace every ``alias.col`` column with the single identifier ``"alias.col"``."""

    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return ref(qualified_name(node), node)
        return node

    return expression.copy().transform(rename)
