"""Rules dropping a LIMIT that cannot change a query's rows.

* ``EXISTS (SELECT … ORDER BY … LIMIT n)`` with n ≥ 1 and no OFFSET is ``EXISTS`` of the
  same query without ORDER BY and LIMIT: a subquery has a row exactly when its first
  n ≥ 1 rows include one, so such a LIMIT (the common ``EXISTS (… LIMIT 1)``) does not
  change the result, and the subquery can then be decorrelated like any other. Any
  other LIMIT inside EXISTS is left for the planner (which maintains it uncorrelated,
  refuses it correlated).
* A SELECT that aggregates without GROUP BY (``SELECT count(*) … LIMIT 1``, HAVING
  alone too) holds at most one row, so ``LIMIT n`` (n ≥ 1, no OFFSET) keeps it whole,
  with or without ORDER BY, correlated or not (a scalar or LATERAL subquery's LIMIT
  then decorrelates like the rest). The planner proves the same of whole plans
  (``planner.row_bounds``); this rule serves the correlated subqueries it never sees.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.sql_frontend.exists_select import exists_query
from ivm.sql_frontend.planner.aggregate_calls import has_aggregate


def limit_in_exists(expression: exp.Expression) -> exp.Expression:
    """``expression`` with every needless ORDER BY … LIMIT inside EXISTS or over an
    aggregate without GROUP BY removed."""
    for exists in list(expression.find_all(exp.Exists)):
        query = exists_query(exists)
        if query is not None and _keeps_first_rows(query):
            query.set("limit", None)
            query.set("order", None)
    for select in list(expression.find_all(exp.Select)):
        if _keeps_first_rows(select) and _one_row(select):
            select.set("limit", None)
            select.set("order", None)
    return expression


def _keeps_first_rows(query: exp.Select) -> bool:
    """``query`` has ``LIMIT n`` with a literal n ≥ 1 (no PERCENT, WITH TIES) and no OFFSET."""
    if query.args.get("offset") is not None:
        return False
    limit = query.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    return (
        isinstance(count, exp.Literal) and not count.is_string and count.this.isdigit()
        and int(count.this) >= 1 and limit.args.get("limit_options") is None
    )


def _one_row(select: exp.Select) -> bool:
    """``select`` aggregates without GROUP BY (so holds at most one row) and its SELECT
    list unnests nothing."""
    if select.args.get("group") is not None or any(e.find(exp.Unnest) for e in select.expressions):
        return False
    return select.args.get("having") is not None or any(
        has_aggregate(e) for e in select.expressions
    )
