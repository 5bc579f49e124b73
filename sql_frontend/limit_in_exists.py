"""Rule: ``EXISTS (SELECT … ORDER BY … LIMIT n)`` with n ≥ 1 and no OFFSET is ``EXISTS``
of the same query without ORDER BY and LIMIT.

A subquery has a row exactly when its first n ≥ 1 rows include one, so such a
LIMIT (the common ``EXISTS (… LIMIT 1)``) does not change the result, and the
subquery can then be decorrelated like any other. Any other LIMIT inside EXISTS
is left for the planner (which maintains it uncorrelated, refuses it correlated).
"""

from __future__ import annotations

from sqlglot import exp


def limit_in_exists(expression: exp.Expression) -> exp.Expression:
    """``expression`` with every needless ORDER BY … LIMIT inside EXISTS removed."""
    for exists in list(expression.find_all(exp.Exists)):
        query = exists.this
        while isinstance(query, exp.Subquery):
            query = query.this
        if not isinstance(query, exp.Select) or query.args.get("offset") is not None:
            continue
        limit = query.args.get("limit")
        count = limit.expression if isinstance(limit, exp.Limit) else None
        if (
            isinstance(count, exp.Literal) and not count.is_string and count.this.isdigit()
            and int(count.this) >= 1 and limit.args.get("limit_options") is None
        ):
            query.set("limit", None)
            query.set("order", None)
    return expression
