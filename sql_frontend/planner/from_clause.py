"""FROM and joins: each source renamed ``alias.column``, joins of any number of sources one
``Join`` (planned later as a delta query); table functions and LATERAL subqueries joined
to what comes before them (``lateral``); no FROM at all, the one-row relation."""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.join import Join
from ivm.operators.project import Project
from ivm.operators.scan import Scan
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.asof_joins import asof_join
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.lateral import (
    is_lateral_item,
    lateral_join,
    reads_tables,
    standalone,
)
from ivm.sql_frontend.planner.naming import ref, rename_columns
from ivm.sql_frontend.planner.outer_joins import SIDES, outer_join, semi_or_anti
from ivm.sql_frontend.planner.temporal_joins import is_temporal_join, temporal_join
from ivm.sql_frontend.planner.values import plan_values, unit


def plan_from(ctx: Context, node: exp.Select, scope: Scope) -> Plan:
    """The FROM clause of ``node`` with its joins."""
    from_ = node.args.get("from_") or node.args.get("from")
    if from_ is None:  # SELECT 1, 'a': one row
        return unit(ctx)
    return plan_joins(ctx, from_.this, node.args.get("joins") or [], scope)


def plan_joins(
    ctx: Context, first: exp.Expression, joins: list[exp.Join], scope: Scope
) -> Plan:
    """``first`` joined with each of ``joins`` in turn, left to right as SQL nests them.

    Consecutive inner and cross joins become one ``Join`` (a delta query later); an
    outer, semi or anti join takes everything before it as its left input.
    """
    relations = [plan_source(ctx, first, scope)]
    conditions: list[exp.Expression] = []
    for join in joins:
        if is_lateral_item(join.this):
            left = _inner(ctx, relations, conditions)
            joined = lateral_join(ctx, join, left, scope)
            if joined is not None:
                relations, conditions = [joined], []
                continue
            relations, conditions = [left], []
        right = plan_source(ctx, join.this, scope)
        on = join.args.get("on")
        condition = rename_columns(on) if on is not None else None
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        if is_temporal_join(join.this):
            left = _inner(ctx, relations, conditions)
            relations, conditions = [temporal_join(ctx, join, left, right, condition)], []
        elif (join.args.get("method") or "").upper() == "ASOF":
            left = _inner(ctx, relations, conditions)
            relations, conditions = [asof_join(ctx, join, left, right, condition)], []
        elif side in SIDES:
            left = _inner(ctx, relations, conditions)
            relations, conditions = [outer_join(ctx, side, left, right, condition)], []
        elif kind in ("SEMI", "ANTI"):
            left = _inner(ctx, relations, conditions)
            relations, conditions = [semi_or_anti(ctx, kind, left, right, condition)], []
        else:
            relations.append(right)
            if condition is not None:
                conditions.append(condition)
    return _inner(ctx, relations, conditions)


def _inner(ctx: Context, relations: list[Plan], conditions: list[exp.Expression]) -> Plan:
    """The inner join of ``relations`` on every one of ``conditions`` (one relation alone
    when it is the only one and nothing filters it)."""
    condition = exp.and_(*conditions) if conditions else None
    if len(relations) == 1 and condition is None:
        return relations[0]
    columns = tuple(c for r in relations for c in r.schema.columns)
    return ctx.typed(Join(schema=Schema(columns), relations=tuple(relations), condition=condition))


def plan_source(ctx: Context, node: exp.Expression, scope: Scope) -> Plan:
    """A FROM item as a plan whose columns are named ``alias.column``."""
    alias = node.alias_or_name
    if isinstance(node, exp.Lateral) and reads_tables(node):  # nothing before it to read
        node = exp.Subquery(this=node.this.this, alias=node.args.get("alias"))
    elif is_lateral_item(node):  # its columns are named alias.column already
        return standalone(ctx, node)
    if isinstance(node, exp.Table):
        inner = _table(ctx, node, scope)
    elif isinstance(node, exp.Subquery) and _is_join_tree(node.this):
        # A parenthesized join (``a LEFT JOIN (b JOIN c ON …) ON …``): its sources
        # keep their own aliases.
        return plan_joins(ctx, node.this, node.this.args.get("joins") or [], scope)
    elif isinstance(node, exp.Subquery):
        inner = ctx.query(node.this, scope)
    elif isinstance(node, exp.Values):
        inner = plan_values(ctx, node)
    else:
        construct = node.key.upper() + " in FROM"
        raise UnsupportedSQL(f"{ctx.locator.describe(construct, node)} is not supported")
    columns = inner.schema.columns
    if isinstance(inner, Scan) and ctx.used_names is not None:  # the columns it may read
        columns = tuple(c for c in columns if c.name.lower() in ctx.used_names) or columns[:1]
    exprs = tuple((f"{alias}.{c.name}", ref(c.name)) for c in columns)
    return ctx.typed(Project(schema=inner.schema, input=inner, exprs=exprs))


def _is_join_tree(node: exp.Expression) -> bool:
    return isinstance(node, (exp.Table, exp.Subquery)) and bool(node.args.get("joins"))


def _table(ctx: Context, node: exp.Table, scope: Scope) -> Plan:
    """A named source: a CTE in scope, else a base table or view."""
    name = node.name
    if node.args.get("db") or node.args.get("catalog"):
        raise UnsupportedSQL(
            f"{ctx.locator.describe('schema-qualified table name', node)} is not supported"
        )
    if name in scope:
        return scope[name]
    stored = ctx.stored_names.get(name.lower())
    if stored is None:
        raise SqlError(ctx.locator.describe("unknown table " + repr(name), node))
    return Scan(schema=ctx.relations[stored], name=stored)
