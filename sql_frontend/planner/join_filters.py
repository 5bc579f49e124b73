"""A WHERE over an inner join, planned as the join's condition and its inputs' filters.

``FROM a, b, c WHERE a.x = b.x AND b.z = c.z AND c.w > 1`` plans as one inner ``Join``
of three inputs; were its WHERE a ``Filter`` above that join, the join would see no
condition: each input's change would meet the other inputs whole (a nested loop, or
hash joins DuckDB finds over whole traces), and no input could be read at the change's
keys through an arrangement. So each (renamed) conjunct goes where it reads:

* one input's columns only (``c.w > 1``): a ``Filter`` on that input, below the join,
  so its changes and state reads are filtered first;
* several inputs' columns (``a.x = b.x``): the join's condition, whose equalities are
  the join's keys (``Join.equi_keys``);
* no input's columns (a constant), or something not safe to evaluate earlier than
  written (``random()``, an unknown function): a ``Filter`` above the join, as written.

Each is exact for an inner join: a deterministic condition on a row of the join is the
same condition on the rows of the inputs it reads (DuckDB's own optimizer moves them the
same way, so a failing expression fails alike).
"""

from __future__ import annotations

from sqlglot import exp

from ivm.operators.filter import Filter
from ivm.operators.join import Join, conjuncts
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.where_pushdown import KEPT


def filtered(ctx: Context, plan: Plan, predicate: exp.Expression) -> Plan:
    """``plan`` filtered by the (renamed) ``predicate``: over an inner join, its conjuncts
    moved into the join's condition and its inputs' filters (see the module docstring)."""
    if not isinstance(plan, Join):
        return ctx.typed(Filter(schema=plan.schema, input=plan, predicate=predicate))
    owner = {c: i for i, r in enumerate(plan.relations) for c in r.schema.names}
    own: dict[int, list[exp.Expression]] = {}
    joining: list[exp.Expression] = []
    above: list[exp.Expression] = []
    for conjunct in conjuncts(predicate):
        names = {c.name for c in conjunct.find_all(exp.Column)}
        if not names or not names <= owner.keys() or conjunct.find(*KEPT) is not None:
            above.append(conjunct)
        elif len(inputs := {owner[n] for n in names}) == 1:
            own.setdefault(inputs.pop(), []).append(conjunct)
        else:
            joining.append(conjunct)
    relations = tuple(
        ctx.typed(Filter(schema=r.schema, input=r, predicate=exp.and_(*own[i])))
        if i in own else r
        for i, r in enumerate(plan.relations)
    )
    terms = [c for c in (plan.condition, *joining) if c is not None]
    condition = exp.and_(*terms) if terms else None
    join = ctx.typed(Join(schema=plan.schema, relations=relations, condition=condition))
    if not above:
        return join
    return ctx.typed(Filter(schema=join.schema, input=join, predicate=exp.and_(*above)))
