"""Subqueries of grouped queries, and those of inner joins' ON (``subqueries`` values them).

* ``values_before_grouping``: subqueries inside aggregate calls and in GROUP BY, valued
  per input row before grouping; FIRST / LAST / ANY_VALUE whose value is determined;
* ``Holders``: the other subqueries of a grouped SELECT list and HAVING, valued per group;
* ``hoist_join_subqueries``: inner joins' ON conjuncts holding a subquery moved to WHERE.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.operators.join import conjuncts
from ivm.operators.project import Project
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.aggregate_calls import calls_in, determined_picks
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.decorrelate import Resolve, plan_resolver
from ivm.sql_frontend.planner.grouping import sql_text
from ivm.sql_frontend.planner.grouping_sets import plain_group
from ivm.sql_frontend.planner.naming import ref, rename_columns
from ivm.sql_frontend.planner.subqueries import (
    COMPARISONS,
    first_construct,
    has_subquery,
    is_construct,
    value_of,
)


def values_before_grouping(
    ctx: Context,
    plan: Plan,
    outputs: list[tuple[str, exp.Expression]],
    group: exp.Group | None,
    having: exp.Having | None,
    scope: Scope,
) -> tuple[Plan, list[tuple[str, exp.Expression]], exp.Group | None, exp.Having | None]:
    """Subqueries a grouped query evaluates per input row: inside an aggregate call's
    arguments (or FILTER) and in GROUP BY. Each is joined to ``plan`` (the rows before
    they are grouped) and replaced by its value there, and also wherever the same
    subquery stands outside a call (a SELECT item repeating a GROUP BY subquery then
    reads that key). The others are left to ``Holders`` (evaluated per group)."""
    plain = plain_group(group)
    keys = group.expressions if group is not None else []
    outputs = [(n, determined_picks(e, keys if plain else None, ctx.locator))
               for n, e in outputs]
    if having is not None:
        having = exp.Having(this=determined_picks(having.this, keys if plain else None,
                                                  ctx.locator))
    per_row: dict[str, exp.Expression] = {}
    for expression in [*keys, *(e for _, e in outputs), *([having.this] if having else [])]:
        roots = [expression] if any(expression is k for k in keys) else calls_in(expression)
        for root in roots:
            for node in _constructs(root):
                per_row.setdefault(sql_text(node), node)
    if not per_row:
        return plan, outputs, group, having
    resolve = plan_resolver(plan)
    values: dict[str, exp.Expression] = {}
    for text, node in per_row.items():
        plan, values[text] = value_of(ctx, plan, node, scope, resolve)

    def replaced(expression: exp.Expression) -> exp.Expression:
        holder = exp.Paren(this=expression.copy())
        for node in list(_constructs(holder)):
            if sql_text(node) in values:
                node.replace(exp.Paren(this=values[sql_text(node)].copy()))
        return holder.this

    outputs = [(name, replaced(e)) for name, e in outputs]
    if group is not None:
        group = group.copy()
        group.set("expressions", [replaced(k) for k in group.expressions])
    if having is not None:
        having = exp.Having(this=replaced(having.this))
    return plan, outputs, group, having


def _constructs(expression: exp.Expression) -> list[exp.Expression]:
    """The outermost subquery constructs of ``expression`` (not those inside another)."""
    found: list[exp.Expression] = []
    stack = [expression]
    while stack:
        node = stack.pop()
        if is_construct(node):
            found.append(node)
            continue
        stack.extend(node.iter_expressions())
    return found


class Holders:
    """Subqueries of a grouped query's SELECT list and HAVING: taken out before the
    aggregation (each replaced by a column ``__sqp<i>``; the operand of IN / ANY / ALL by
    a column ``__sqx<i>``, which the aggregation computes) and evaluated over its output."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.constructs: list[tuple[str, exp.Expression]] = []
        self.operands: list[tuple[str, exp.Expression]] = []

    def take(self, expression: exp.Expression) -> exp.Expression:
        """``expression`` with its subqueries replaced by placeholder columns."""
        holder = exp.Paren(this=expression.copy())
        while (node := first_construct(holder)) is not None:
            name = f"__sqp{len(self.constructs)}"
            node.replace(ref(name, node))
            if isinstance(node, (exp.In, *COMPARISONS)):
                operand = node.this
                key = f"__sqx{len(self.operands)}"
                self.operands.append((key, rename_columns(operand)))
                operand.replace(ref(key, operand))
            self.constructs.append((name, node))
        return holder.this

    def fill(
        self, plan: Plan, operands: list[tuple[str, exp.Expression]], resolve: Resolve,
        scope: Scope,
    ) -> Plan:
        """The aggregate ``plan`` with the operands (rewritten over it) and every
        subquery's value as columns."""
        ctx = self.ctx
        if operands:
            exprs = tuple((n, ref(n)) for n in plan.schema.names) + tuple(operands)
            plan = ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))
        for name, node in self.constructs:
            plan, value = value_of(ctx, plan, node, scope, resolve)
            exprs = tuple((n, ref(n)) for n in plan.schema.names) + ((name, value),)
            plan = ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))
        return plan


def hoist_join_subqueries(node: exp.Select) -> exp.Select:
    """``node`` with the conjuncts of inner joins' ON that hold a subquery moved to WHERE
    (the same rows: an inner join filters its product)."""
    joins = node.args.get("joins") or []
    if not any(has_subquery(j.args.get("on")) for j in joins):
        return node
    node = node.copy()
    moved: list[exp.Expression] = []
    for join in node.args.get("joins") or []:
        on = join.args.get("on")
        inner = not join.args.get("side") and (join.args.get("kind") or "").upper() in (
            "", "INNER", "CROSS")
        if not has_subquery(on) or not inner:
            continue
        terms = conjuncts(on)
        keep = [t for t in terms if not has_subquery(t)]
        moved += [t for t in terms if has_subquery(t)]
        join.set("on", exp.and_(*keep) if keep else None)
    where = node.args.get("where")
    terms = ([where.this] if where is not None else []) + moved
    node.set("where", exp.Where(this=exp.and_(*terms)))
    return node
