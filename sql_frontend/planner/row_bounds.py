"""How many rows a plan can hold at most, where the plan alone proves it.

LIMIT without ORDER BY keeps arbitrary rows, except when the relation it cuts can
never hold more rows than the LIMIT keeps: then it keeps them all, whatever order
DuckDB reads them in (TPC-DS's ``SELECT … FROM (SELECT avg(…) …) B1, (…) B2 LIMIT
100``). ``max_rows`` proves such a bound from the plan's shape only, never from the
data: an aggregate without GROUP BY holds one row; VALUES (and ``SELECT`` without
``FROM``) its listed rows; a filter, projection, DISTINCT, window or guard at most
its input's; a join or cross product at most the product of its inputs'; UNION ALL
the sum; INTERSECT the smaller side's, EXCEPT the left's; ``ORDER BY … LIMIT k`` at
most k; GROUP BY at most its input's rows. A table, a flat map or anything else has
no bound (None).
"""

from __future__ import annotations

from functools import reduce

from ivm.operators.aggregate import Aggregate
from ivm.operators.difference import Difference
from ivm.operators.distinct import Distinct
from ivm.operators.distinct_on import DistinctOn
from ivm.operators.filter import Filter
from ivm.operators.guard import Guard
from ivm.operators.join import Join
from ivm.operators.product import Product
from ivm.operators.project import Project
from ivm.operators.set_operation import SetOperation
from ivm.operators.top_k import TopK
from ivm.operators.union_all import UnionAll
from ivm.operators.values import Values
from ivm.operators.window import Window
from ivm.plan.node import Plan

_SAME_AS_INPUT = (Filter, Project, Distinct, DistinctOn, Window, Guard)
"""Nodes that never hold more rows than their (one) input."""


def max_rows(plan: Plan) -> int | None:
    """The most rows ``plan`` can hold whatever its inputs hold; None if unbounded."""
    if isinstance(plan, Values):
        return len(plan.rows)
    if isinstance(plan, Aggregate):
        return 1 if not plan.keys else max_rows(plan.input)
    if isinstance(plan, _SAME_AS_INPUT):
        return max_rows(plan.children()[0])
    if isinstance(plan, TopK):
        below = max_rows(plan.input)
        return plan.limit if below is None else min(plan.limit, max(below - plan.offset, 0))
    if isinstance(plan, Difference):
        return max_rows(plan.minuend)
    if isinstance(plan, SetOperation):
        left, right = max_rows(plan.left), max_rows(plan.right)
        if plan.operation.startswith("INTERSECT"):
            known = [b for b in (left, right) if b is not None]
            return min(known) if known else None
        return left
    if isinstance(plan, (Join, Product, UnionAll)):
        bounds = [max_rows(child) for child in plan.children()]
        if any(b is None for b in bounds):
            return None
        if isinstance(plan, UnionAll):
            return sum(bounds)
        return reduce(lambda a, b: a * b, bounds, 1)
    return None
