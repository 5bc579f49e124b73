"""SQL text of relational operators over relations given as SQL text.

Two forms of every relational operator:

* *weighted* (Z-set) SQL: each relation carries a weight column ``__w``; joins
  multiply weights, aggregates sum them. Inputs need not be consolidated.
* *plain* (bag) SQL: ordinary SQL semantics, used to let DuckDB type each plan
  node and as a non-incremental second oracle.

Functions here build text only; nothing is executed.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ivm.schema import Schema, quote
from ivm.storage.sqltext import W, column_list, consolidate_sql, expand_sql

__all__ = ["W", "column_list", "consolidate_sql", "expand_sql"]  # re-exported for operators


_RENDERED: dict[int, tuple[exp.Expression, str]] = {}


def sql_of(expression: exp.Expression) -> str:
    """DuckDB SQL text of a scalar sqlglot expression.

    Plan expressions are immutable and rendered every epoch; the text is kept per
    expression object (held in the cache, so its id cannot be reused).
    """
    cached = _RENDERED.get(id(expression))
    if cached is None or cached[0] is not expression:
        cached = (expression, expression.sql(dialect="duckdb"))
        _RENDERED[id(expression)] = cached
    return cached[1]


def empty_relation(schema: Schema, weighted: bool = True) -> str:
    """A relation with ``schema``'s columns (and a weight) and no rows."""
    parts = [f"CAST(NULL AS {c.type}) AS {quote(c.name)}" for c in schema.columns]
    if weighted:
        parts.append(f"CAST(NULL AS BIGINT) AS {W}")
    return f"SELECT {', '.join(parts)} WHERE false"


def filter_sql(source: str, predicate: exp.Expression) -> str:
    """Rows of ``source`` satisfying ``predicate``; weights pass through."""
    return f"SELECT * FROM ({source}) AS __in WHERE {sql_of(predicate)}"


def project_sql(source: str, exprs: Sequence[tuple[str, exp.Expression]], weighted: bool) -> str:
    """Evaluate ``exprs`` on every row of ``source``; the weight passes through."""
    parts = [f"{sql_of(e)} AS {quote(name)}" for name, e in exprs]
    if weighted:
        parts.append(W)
    return f"SELECT {', '.join(parts)} FROM ({source}) AS __in"


def join_sql(
    sources: Sequence[str],
    schemas: Sequence[Schema],
    condition: exp.Expression | None,
    weighted: bool,
) -> str:
    """Inner join of ``sources``; column names are unique across them. Weights multiply."""
    aliases = [f"__r{i}" for i in range(len(sources))]
    select = [column_list(s.names, a) for s, a in zip(schemas, aliases, strict=True) if s.names]
    if weighted:
        select.append(" * ".join(f"{a}.{W}" for a in aliases) + f" AS {W}")
    from_ = ", ".join(f"({s}) AS {a}" for s, a in zip(sources, aliases, strict=True))
    where = f" WHERE {sql_of(condition)}" if condition is not None else ""
    return f"SELECT {', '.join(select)} FROM {from_}{where}"


def at_keys_sql(column: str, keys: str) -> str:
    """A WHERE clause keeping the rows whose ``column`` equals a value of ``keys`` (SQL of
    one column); NULL matches nothing."""
    return f"WHERE {quote(column)} IN (SELECT * FROM ({keys}) AS __k)"


def union_all_sql(sources: Sequence[str]) -> str:
    """Concatenation of ``sources`` (same column order)."""
    return " UNION ALL ".join(f"SELECT * FROM ({s}) AS __u{i}" for i, s in enumerate(sources))


def null_safe_match(names: Sequence[str], left: str, right: str) -> str:
    """Predicate: the ``names`` columns of ``left`` and ``right`` are equal, NULL matching NULL."""
    if not names:
        return "true"
    return " AND ".join(f"{left}.{quote(n)} IS NOT DISTINCT FROM {right}.{quote(n)}" for n in names)
