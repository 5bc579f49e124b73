"""A rule making ``EXISTS (SELECT <list> …)`` read no columns through its SELECT list.

``EXISTS`` asks whether its subquery has a row; what the row holds does not matter, so
``EXISTS (SELECT * FROM lineitem l2 WHERE …)`` (TPC-H q4, q21, q22) is ``EXISTS (SELECT 1
FROM lineitem l2 WHERE …)``. Written with ``*``, the subquery seemed to read every column
of lineitem, which kept every column of every table in the plan (``planner.used_columns``
drops the columns a query never names, except where a ``*`` may read them) and in the
arrangements an epoch reads. The list is replaced by ``1`` only where it cannot change
whether a row exists: no aggregate (``EXISTS (SELECT count(*) …)`` always has its one
row), no GROUP BY, HAVING, DISTINCT, window, set operation, LIMIT or OFFSET.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.sql_frontend.planner.aggregate_calls import has_aggregate


def exists_select_one(expression: exp.Expression) -> exp.Expression:
    """``expression`` with the SELECT list of each EXISTS subquery that
    ``needless_list`` allows replaced by ``1``."""
    for exists in list(expression.find_all(exp.Exists)):
        query = exists_query(exists)
        if query is not None and needless_list(query):
            query.set("expressions", [exp.Literal.number(1)])
    return expression


def exists_query(exists: exp.Exists) -> exp.Select | None:
    """The SELECT an EXISTS tests (inside any parentheses), or None."""
    query = exists.this
    while isinstance(query, exp.Subquery):
        query = query.this
    return query if isinstance(query, exp.Select) else None


def needless_list(query: exp.Select) -> bool:
    """Whether ``query``'s SELECT list cannot change whether it has a row."""
    if any(query.args.get(k) for k in ("group", "having", "distinct", "limit", "offset",
                                       "qualify", "windows")):
        return False
    return not any(has_aggregate(e) or e.find(exp.Window) for e in query.expressions)
