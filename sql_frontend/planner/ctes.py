"""Common table expressions: each non-recursive CTE is planned once, inline, and read by
name from the query that defines it (a CTE used twice is one plan node)."""

from __future__ import annotations

from sqlglot import exp

from ivm.sql_frontend.planner.context import Context, Scope


def with_ctes(ctx: Context, node: exp.Expression, scope: Scope) -> Scope:
    """``scope`` plus the CTEs ``node`` defines (each sees the ones before it)."""
    with_ = node.args.get("with_") or node.args.get("with")
    if not with_:
        return scope
    scope = dict(scope)
    for cte in with_.expressions:
        scope[cte.alias_or_name] = ctx.query(cte.this, scope)
    return scope
