"""One SELECT: FROM → WHERE → GROUP BY / aggregates → HAVING → windows, QUALIFY, DISTINCT ON →
SELECT list → DISTINCT → ORDER BY … LIMIT / OFFSET."""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError
from ivm.operators.distinct import Distinct
from ivm.operators.filter import Filter
from ivm.operators.project import Project
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.aggregate_calls import calls_in, has_aggregate
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.ctes import with_ctes
from ivm.sql_frontend.planner.decorrelate import Resolve
from ivm.sql_frontend.planner.from_clause import plan_from
from ivm.sql_frontend.planner.grouped_subqueries import (
    Holders,
    hoist_join_subqueries,
    values_before_grouping,
)
from ivm.sql_frontend.planner.grouping import plan_aggregation, sql_text
from ivm.sql_frontend.planner.grouping_sets import grouping_sets
from ivm.sql_frontend.planner.join_filters import filtered
from ivm.sql_frontend.planner.naming import ref, rename_columns, unique_names
from ivm.sql_frontend.planner.subqueries import has_subquery, plan_where, with_values
from ivm.sql_frontend.planner.top_k import limited, ordering_of
from ivm.sql_frontend.planner.unnest_select import unnest_outputs
from ivm.sql_frontend.planner.where_pushdown import push_where
from ivm.sql_frontend.planner.windows import distinct_on, plan_windows, window_operands


def plan_select(ctx: Context, node: exp.Select, scope: Scope) -> Plan:
    """Plan one (qualified) SELECT whose CTEs are ``scope`` plus its own."""
    scope = with_ctes(ctx, node, scope)
    node = push_where(hoist_join_subqueries(node))
    _no_aggregates_in_clauses(ctx, node)
    plan = plan_from(ctx, node, scope)
    where = node.args.get("where")
    if where is not None and has_subquery(where.this):
        plan = plan_where(ctx, plan, where.this, scope)
    elif where is not None:
        plan = filtered(ctx, plan, rename_columns(where.this))
    raw = [(e.alias_or_name, e.unalias()) for e in node.expressions]
    hide = node.args.get("distinct") is None or distinct_on(node) is not None
    ordering = ordering_of(ctx, node, raw, can_hide=hide, columns=plan.schema.names)
    raw += ordering.hidden if ordering is not None else []
    raw += window_operands(node)  # QUALIFY, DISTINCT ON: planned with the SELECT list
    having = node.args.get("having")
    group = node.args.get("group")
    if group is not None or having is not None or any(has_aggregate(e) for _, e in raw):
        plan, raw, group, having = values_before_grouping(ctx, plan, raw, group, having, scope)
        holders = Holders(ctx)
        outputs = [(name, rename_columns(holders.take(e))) for name, e in raw]
        positions = {i + 1: e for i, (_, e) in enumerate(outputs)}
        keys, sets = grouping_sets(group, outputs[: len(node.expressions)], positions)
        having_expr = rename_columns(holders.take(having.this)) if having is not None else None
        plan, rewritten, having_expr = plan_aggregation(
            ctx, plan, keys, outputs + holders.operands, having_expr, sets
        )
        outputs, operands = rewritten[: len(outputs)], rewritten[len(outputs):]
        if holders.constructs:
            plan = holders.fill(plan, operands, _group_resolver(keys), scope)
        if having_expr is not None:
            plan = ctx.typed(Filter(schema=plan.schema, input=plan, predicate=having_expr))
    else:
        outputs = []
        for name, e in raw:
            if has_subquery(e):
                plan, e = with_values(ctx, plan, e, scope)
            outputs.append((name, rename_columns(e)))
    plan, outputs = plan_windows(ctx, node, plan, outputs)
    plan, outputs = unnest_outputs(ctx, node, plan, outputs)
    names = unique_names([name for name, _ in outputs])
    exprs = tuple((name, e) for name, (_, e) in zip(names, outputs, strict=True))
    plan = ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))
    if node.args.get("distinct") is not None and distinct_on(node) is None:
        plan = ctx.typed(Distinct(schema=plan.schema, input=plan))
    return limited(ctx, plan, ordering)


def _group_resolver(keys: list[exp.Expression]) -> Resolve:
    """A grouped query's columns, for its subqueries: the GROUP BY key each one is."""
    names = {sql_text(k): f"__k{i}" for i, k in enumerate(keys)}

    def resolve(column: exp.Column) -> exp.Expression | None:
        name = names.get(sql_text(rename_columns(column)))
        return ref(name, column) if name is not None else None

    return resolve


def _no_aggregates_in_clauses(ctx: Context, node: exp.Select) -> None:
    """SqlError for an aggregate call in WHERE, JOIN … ON or GROUP BY."""
    clauses = [
        ("WHERE", node.args.get("where"), ": use HAVING"),
        ("GROUP BY", node.args.get("group"), ": not allowed there"),
    ]
    joins = node.args.get("joins") or []
    clauses += [("JOIN … ON", j.args.get("on"), ": not allowed there") for j in joins]
    for clause, expression, hint in clauses:
        calls = calls_in(expression) if expression is not None else []
        if calls:
            construct = ctx.locator.describe(f"aggregate in {clause}", calls[0])
            raise SqlError(f"{construct}{hint}")
