"""Say where in the SQL text a construct is, for error messages."""

from __future__ import annotations

from sqlglot import exp


def locate(node: exp.Expression) -> str:
    """``line L, column C`` of the first token of ``node`` that carries a position, or ''."""
    for part in node.walk():
        meta = part.meta if hasattr(part, "meta") else None
        if meta and "line" in meta:
            return f"line {meta['line']}, column {meta['col']}"
    return ""


def describe(construct: str, node: exp.Expression) -> str:
    """``construct`` with its position and a snippet of its SQL."""
    where = locate(node)
    snippet = node.sql(dialect="duckdb")
    if len(snippet) > 80:
        snippet = snippet[:77] + "..."
    return f"{construct} (at {where}: {snippet})" if where else f"{construct} ({snippet})"
