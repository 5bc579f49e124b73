"""FROM and joins: each source renamed ``alias.column``, joins of any number of sources one
``Join`` (planned later as a delta query)."""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.join import Join
from ivm.operators.project import Project
from ivm.operators.scan import Scan
from ivm.plan.node import Plan
from ivm.schema import Schema
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.naming import ref, rename_columns


def plan_from(ctx: Context, node: exp.Select, scope: Scope) -> Plan:
    """The FROM clause of ``node`` with its joins: one source, or one Join of all of them."""
    from_ = node.args.get("from_") or node.args.get("from")
    if from_ is None:
        construct = ctx.locator.describe("SELECT without FROM", node)
        raise UnsupportedSQL(f"{construct} is not supported")
    relations = [plan_source(ctx, from_.this, scope)]
    conditions: list[exp.Expression] = []
    for join in node.args.get("joins") or []:
        relations.append(plan_source(ctx, join.this, scope))
        on = join.args.get("on")
        if on is not None:
            conditions.append(rename_columns(on))
    if len(relations) == 1:
        return relations[0]
    condition = exp.and_(*conditions) if conditions else None
    columns = tuple(c for r in relations for c in r.schema.columns)
    return ctx.typed(Join(schema=Schema(columns), relations=tuple(relations), condition=condition))


def plan_source(ctx: Context, node: exp.Expression, scope: Scope) -> Plan:
    """A FROM item as a plan whose columns are named ``alias.column``."""
    alias = node.alias_or_name
    if isinstance(node, exp.Table):
        inner = _table(ctx, node, scope)
    elif isinstance(node, exp.Subquery):
        inner = ctx.query(node.this, scope)
    else:
        construct = type(node).__name__ + " in FROM"
        raise UnsupportedSQL(f"{ctx.locator.describe(construct, node)} is not supported")
    exprs = tuple((f"{alias}.{c.name}", ref(c.name)) for c in inner.schema.columns)
    return ctx.typed(Project(schema=inner.schema, input=inner, exprs=exprs))


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
