"""Common table expressions: each CTE is planned once, inline, and read by name from the
query that defines it (a CTE used twice is one plan node). Under WITH RECURSIVE, a CTE
that reads itself is planned by ``recursive``."""

from __future__ import annotations

from sqlglot import exp

from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.recursive import plan_recursive, reads_itself


def with_ctes(ctx: Context, node: exp.Expression, scope: Scope) -> Scope:
    """``scope`` plus the CTEs ``node`` defines (each sees the ones before it)."""
    with_ = node.args.get("with_") or node.args.get("with")
    if not with_:
        return scope
    scope = dict(scope)
    recursive = bool(with_.args.get("recursive"))
    for cte in with_.expressions:
        if recursive and reads_itself(cte):
            scope[cte.alias_or_name] = plan_recursive(ctx, cte, scope)
        else:
            scope[cte.alias_or_name] = ctx.query(cte.this, scope)
    return scope
