"""Render plan nodes to DuckDB SQL over relations given as SQL text.

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

from ivm.plan.nodes import (
    Aggregate,
    AggregateCall,
    Distinct,
    Filter,
    Join,
    Plan,
    Project,
    Scan,
    UnionAll,
)
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


def union_all_sql(sources: Sequence[str]) -> str:
    """Concatenation of ``sources`` (same column order)."""
    return " UNION ALL ".join(f"SELECT * FROM ({s}) AS __u{i}" for i, s in enumerate(sources))


def plain_aggregate_call(call: AggregateCall) -> str:
    """SQL of one aggregate call with ordinary (unweighted) semantics."""
    if call.func == "count_star":
        return "COUNT(*)"
    return f"{call.func.upper()}({quote(call.arg or '')})"


def plain_aggregate_sql(source: str, keys: Sequence[str], calls: Sequence[AggregateCall]) -> str:
    """GROUP BY ``keys`` over a bag (no weights); a global aggregate when keys is empty."""
    parts = [quote(k) for k in keys]
    parts += [f"{plain_aggregate_call(c)} AS {quote(c.name)}" for c in calls]
    group = f" GROUP BY {column_list(keys)}" if keys else ""
    return f"SELECT {', '.join(parts)} FROM ({source}) AS __in{group}"


def plain_distinct_sql(source: str) -> str:
    """Each distinct row of a bag once."""
    return f"SELECT DISTINCT * FROM ({source}) AS __in"


def null_safe_match(names: Sequence[str], left: str, right: str) -> str:
    """Predicate: the ``names`` columns of ``left`` and ``right`` are equal, NULL matching NULL."""
    if not names:
        return "true"
    return " AND ".join(f"{left}.{quote(n)} IS NOT DISTINCT FROM {right}.{quote(n)}" for n in names)


def plain_sql(node: Plan) -> str:
    """Non-incremental (bag) SQL of a whole plan; a Scan reads the relation of its name."""
    if isinstance(node, Scan):
        return f"SELECT {column_list(node.schema.names)} FROM {quote(node.name)}"
    if isinstance(node, Filter):
        return filter_sql(plain_sql(node.input), node.predicate)
    if isinstance(node, Project):
        return project_sql(plain_sql(node.input), node.exprs, weighted=False)
    if isinstance(node, Join):
        return join_sql(
            [plain_sql(r) for r in node.relations],
            [r.schema for r in node.relations],
            node.condition,
            weighted=False,
        )
    if isinstance(node, Aggregate):
        return plain_aggregate_sql(plain_sql(node.input), node.keys, node.calls)
    if isinstance(node, Distinct):
        return plain_distinct_sql(plain_sql(node.input))
    if isinstance(node, UnionAll):
        return union_all_sql([plain_sql(p) for p in node.parts])
    raise TypeError(f"no plain rendering for {type(node).__name__}")
