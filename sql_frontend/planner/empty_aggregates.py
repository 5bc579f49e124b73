"""What an aggregate call gives over no rows, for the subqueries that see no rows.

A correlated aggregate subquery is planned as a GROUP BY of the correlation keys joined
back to the enclosing query; an outer row whose key has no group reads no row of it,
and must see the call's value over no rows (the "count bug"): 0 for the counts, NULL for
every other aggregate. DuckDB's counts over no rows: ``count(*)``, ``count(x)``,
``count(DISTINCT x)``, ``count_star()``, ``approx_count_distinct``, ``regr_count``, each
with or without FILTER; ``count_if`` gives NULL.
"""

from __future__ import annotations

from sqlglot import exp

COUNTS = (exp.Count, exp.ApproxDistinct, exp.RegrCount)
"""Calls whose value over no rows is 0."""
COUNT_NAMES = frozenset({"count_star"})
"""The same among the calls sqlglot leaves as anonymous functions (lower case)."""


def counts_over_no_rows(call: exp.Expression) -> bool:
    """Whether the aggregate ``call``'s value over no rows is 0, not NULL (a FILTER keeps
    its call's)."""
    while isinstance(call, exp.Filter):
        call = call.this
    return isinstance(call, COUNTS) or (
        isinstance(call, exp.Anonymous) and str(call.this).lower() in COUNT_NAMES
    )


def empty_value(call: exp.Expression) -> exp.Expression:
    """The value of the aggregate ``call`` over no rows: 0 for the counts, NULL for the
    rest."""
    return exp.Literal.number(0) if counts_over_no_rows(call) else exp.null()
