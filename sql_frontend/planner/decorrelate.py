"""Decorrelate one subquery: plan it without its correlation, and say how it correlates.

A subquery's reference to a column of the enclosing query (``l.k`` inside
``EXISTS (SELECT 1 FROM r WHERE r.k = l.k)``) may appear in a conjunct of its WHERE
(and, for an aggregate subquery, in its SELECT expression outside the aggregate
calls). Those conjuncts are taken out; the rest of the subquery is planned as an
ordinary query whose SELECT list also outputs what the correlation needs:

* ``outer = inner`` conjuncts become *pairs* (an outer expression, an inner key column
  ``__k<i>``): an equi-join, or the GROUP BY of an aggregate subquery;
* any other correlated conjunct stays a *theta* condition over outer columns and inner
  columns (``__c<i>``), for a general semi-join.

The subquery's columns are named ``<alias>.__v<i>`` (values), ``<alias>.__k<i>``,
``<alias>.__c<i>`` and ``<alias>.__e`` (TRUE: a match flag), with a fresh alias per
subquery, so they never clash with the enclosing query's ``alias.column`` names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.join import conjuncts
from ivm.operators.project import Project
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.aggregate_calls import calls_in, has_aggregate
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.empty_aggregates import empty_value
from ivm.sql_frontend.planner.grouping import sql_text
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.planner.subquery_joins import outer_keys
from ivm.sql_frontend.planner.windows import windowing

Resolve = Callable[[exp.Column], exp.Expression | None]
"""An enclosing query's column, as an expression over the plan the subquery joins to (None
when that plan does not have it)."""


@dataclass
class Inner:
    """A decorrelated subquery: its plan and how it joins to the enclosing query."""

    alias: str
    plan: Plan
    values: list[str]
    pairs: list[tuple[exp.Expression, str]]
    theta: exp.Expression | None = None
    template: exp.Expression | None = None
    """Aggregate subqueries: the SELECT expression over the value (call) columns."""
    empty: exp.Expression | None = None
    """Aggregate subqueries: the SELECT expression over no rows (the "count bug")."""
    calls: list[tuple[str, exp.Expression]] | None = None
    """Aggregate subqueries correlated by a non-equality (``theta``): the calls, named as
    ``template`` reads them, over ``plan``'s columns, for the caller to compute per
    distinct outer value (``plan`` then holds the subquery's rows, not its groups)."""

    @property
    def flag(self) -> str:
        """The match-flag column (TRUE on every row of the subquery's plan, when present)."""
        return f"{self.alias}.__e"

    @property
    def keys(self) -> list[str]:
        """The inner key columns of the pairs."""
        return [c for _, c in self.pairs]


def plan_resolver(plan: Plan) -> Resolve:
    """Resolve ``alias.column`` against ``plan``'s columns."""
    names = set(plan.schema.names)

    def resolve(column: exp.Column) -> exp.Expression | None:
        name = f"{column.table}.{column.name}"
        return ref(name, column) if column.table and name in names else None

    return resolve


def decorrelate(
    ctx: Context, resolve: Resolve, node: exp.Expression, scope: Scope, *, aggregate: bool,
    outer: Plan | None = None,
) -> Inner:
    """Plan the subquery ``node``. ``aggregate``: it is one aggregate expression without
    GROUP BY; correlation pairs then become its GROUP BY and the SELECT expression a
    template evaluated after the join. ``outer``: the plan ``resolve`` reads, given when
    the caller joins such an aggregate back to it by the pairs (``left_join_unique``):
    the subquery's rows are then first restricted to the keys ``outer`` holds (its magic
    set), so only the groups the query reads are kept and maintained."""
    alias = ctx.fresh_alias()
    while isinstance(node, exp.Subquery):
        node = node.this
    own = {n.alias_or_name for n in node.find_all(exp.Table, exp.Subquery, exp.CTE, exp.Values)}

    def is_outer(column: exp.Expression) -> bool:
        return isinstance(column, exp.Column) and bool(column.table) and column.table not in own

    outer_columns = [c for c in node.find_all(exp.Column) if is_outer(c)]
    for column in outer_columns:
        if resolve(column) is None:
            raise UnsupportedSQL(
                f"{ctx.locator.describe('correlated reference', column)} is not supported: a "
                "subquery may refer only to columns of the query right around it"
            )
    found = windowing(node) if outer_columns else None
    if found is not None:
        construct = ctx.locator.describe(f"{found[0]} in a correlated subquery", found[1])
        raise UnsupportedSQL(f"{construct} is not supported")
    limited = node.args.get("limit") is not None or node.args.get("offset") is not None
    if not isinstance(node, exp.Select) or limited:
        # Planned whole: a set operation, or a LIMIT that applies to the query's rows.
        if outer_columns:
            what = "LIMIT / OFFSET" if limited else "set operation"
            construct = ctx.locator.describe(f"correlated {what} in a subquery", node)
            raise UnsupportedSQL(f"{construct} is not supported")
        return _renamed(ctx, alias, ctx.query(node, scope), [], None)
    where = node.args.get("where")
    local: list[exp.Expression] = []
    correlated: list[exp.Expression] = []
    for term in conjuncts(where.this) if where is not None else []:
        (correlated if any(is_outer(c) for c in term.find_all(exp.Column)) else local).append(term)
    allowed = {id(c) for term in correlated for c in term.find_all(exp.Column)}
    if aggregate:
        allowed |= {id(c) for c in _outside_calls(node.expressions[0])}
    for column in outer_columns:
        if id(column) not in allowed:
            raise UnsupportedSQL(
                f"{ctx.locator.describe('correlated reference', column)} is not supported "
                "there: only in the subquery's WHERE (or outside its aggregate calls)"
            )
    pairs: list[tuple[exp.Expression, exp.Expression]] = []
    theta: list[exp.Expression] = []
    for term in correlated:
        if term.find(exp.Query) is not None:
            construct = ctx.locator.describe("subquery correlated with an enclosing query", term)
            raise UnsupportedSQL(f"{construct} is not supported")
        pair = _pair(term, is_outer)
        if pair is not None:
            pairs.append(pair)
        else:
            theta.append(term)
    if outer_columns and not aggregate and (
        node.args.get("group") or node.args.get("having")
        or any(has_aggregate(e) for e in node.expressions)
    ):
        construct = ctx.locator.describe("correlated subquery with GROUP BY or aggregates", node)
        raise UnsupportedSQL(f"{construct} is not supported here")
    query = node.copy()
    query.set("where", exp.Where(this=exp.and_(*(t.copy() for t in local))) if local else None)
    key_exprs = [(f"__k{i}", inner) for i, (_, inner) in enumerate(pairs)]
    outer_exprs = [outer for outer, _ in pairs]

    def outer_sql(expression: exp.Expression) -> exp.Expression:
        def swap(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and is_outer(n):
                return resolve(n) or n
            return n

        return expression.copy().transform(swap)

    if aggregate:
        if (pairs or theta) and (node.args.get("group") or node.args.get("having")):
            construct = ctx.locator.describe("correlated subquery with GROUP BY or HAVING", node)
            raise UnsupportedSQL(f"{construct} is not supported")
        expression = node.expressions[0].unalias()
        calls = {sql_text(c): (f"__v{i}", c) for i, c in
                 enumerate({sql_text(c): c for c in calls_in(expression)}.values())}
        if theta:
            inner = _theta_rows(ctx, alias, query, scope, calls, key_exprs, theta,
                                [outer_sql(o) for o in outer_exprs], is_outer, outer_sql)
        else:
            outputs = [(n, c) for n, c in calls.values()] + key_exprs + [("__e", exp.true())]
            query.set("expressions", [exp.alias_(e.copy(), n) for n, e in outputs])
            if key_exprs:
                query.set("group", exp.Group(expressions=[e.copy() for _, e in key_exprs]))
            over_outer = [outer_sql(o) for o in outer_exprs]
            if key_exprs and outer is not None:
                pairs_back = [(o, f"{alias}.__k{i}") for i, o in enumerate(over_outer)]
                scope = _magic_set(ctx, alias, query, scope, outer, pairs_back, key_exprs)
            inner = _renamed(ctx, alias, ctx.query(query, scope), over_outer, None)

        def over(empty: bool) -> exp.Expression:
            def swap(n: exp.Expression) -> exp.Expression:
                if sql_text(n) in calls and not isinstance(n, exp.Column):
                    if empty:
                        return empty_value(n)
                    return ref(f"{alias}.{calls[sql_text(n)][0]}", n)
                return n

            return outer_sql(expression).transform(swap)

        inner.template, inner.empty = over(False), over(True)
        inner.values = [f"{alias}.{n}" for n, _ in calls.values()]
        return inner
    inner_columns: dict[str, exp.Expression] = {}
    for term in theta:
        for column in term.find_all(exp.Column):
            if not is_outer(column):
                inner_columns.setdefault(sql_text(column), column)
    theta_names = {text: f"__c{i}" for i, text in enumerate(inner_columns)}
    values = [(f"__v{i}", e.unalias()) for i, e in enumerate(node.expressions)]
    outputs = values + key_exprs + [(theta_names[t], c) for t, c in inner_columns.items()]
    query.set("expressions", [exp.alias_(e.copy(), n) for n, e in outputs])
    condition = None
    if theta:

        def swap(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and not is_outer(n):
                return ref(f"{alias}.{theta_names[sql_text(n)]}", n)
            return n

        condition = outer_sql(exp.and_(*(t.copy() for t in theta)).transform(swap))
    inner = _renamed(ctx, alias, ctx.query(query, scope),
                     [outer_sql(o) for o in outer_exprs], condition)
    inner.values = [f"{alias}.{n}" for n, _ in values]
    return inner


def _magic_set(
    ctx: Context,
    alias: str,
    query: exp.Select,
    scope: Scope,
    outer: Plan,
    pairs: list[tuple[exp.Expression, str]],
    key_exprs: list[tuple[str, exp.Expression]],
) -> Scope:
    """Restrict the aggregate subquery ``query`` to the keys ``outer`` holds (Neumann and
    Kemper's magic set; Q17's average per part over lineitem is kept for the few parts
    of the brand and container asked, not for all 200,000): ``outer``'s distinct keys
    (the node ``left_join_unique`` joins the groups to) enter the scope under a name of
    their own, and ``query`` gains ``(inner keys) IN (SELECT keys FROM it)``. A row whose
    key is NULL matches no outer row either way. Returns the scope to plan ``query`` in."""
    keys, _ = outer_keys(ctx, outer, pairs)
    names = [f"k{i}" for i in range(len(pairs))]
    exprs = tuple((n, ref(c)) for n, c in zip(names, keys.schema.names, strict=True))
    renamed = ctx.typed(Project(schema=keys.schema, input=keys, exprs=exprs))
    cte = f"__ivm_keys_{alias}"
    inner = [e.copy() for _, e in key_exprs]
    operand = inner[0] if len(inner) == 1 else exp.Tuple(expressions=inner)
    columns = [exp.column(n, table=cte) for n in names]  # qualified, as the planner reads
    within = exp.In(this=operand, query=exp.select(*columns).from_(cte))
    where = query.args.get("where")
    query.set("where", exp.Where(this=exp.and_(where.this, within) if where else within))
    return {**scope, cte: renamed}


def _theta_rows(
    ctx: Context,
    alias: str,
    query: exp.Select,
    scope: Scope,
    calls: dict[str, tuple[str, exp.Expression]],
    key_exprs: list[tuple[str, exp.Expression]],
    theta: list[exp.Expression],
    outer: list[exp.Expression],
    is_outer: Callable[[exp.Expression], bool],
    outer_sql: Callable[[exp.Expression], exp.Expression],
) -> Inner:
    """An aggregate subquery correlated by a non-equality: its rows (not grouped), with
    the inner columns its calls and its theta condition read (``__c<i>``) and its keys;
    ``calls`` rewritten over them, for the caller to group per outer value."""
    inner_columns: dict[str, exp.Expression] = {}
    for part in [*theta, *(c for _, c in calls.values())]:
        for column in part.find_all(exp.Column):
            if not is_outer(column):
                inner_columns.setdefault(sql_text(column), column)
    names = {text: f"__c{i}" for i, text in enumerate(inner_columns)}
    outputs = key_exprs + [(names[t], c) for t, c in inner_columns.items()]
    if not outputs:
        outputs = [("__e", exp.true())]  # COUNT(*) over rows matched without inner columns
    query.set("expressions", [exp.alias_(e.copy(), n) for n, e in outputs])

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not is_outer(n):
            return ref(f"{alias}.{names[sql_text(n)]}", n)
        return n

    condition = outer_sql(exp.and_(*(t.copy() for t in theta)).transform(swap))
    inner = _renamed(ctx, alias, ctx.query(query, scope), outer, condition)
    inner.calls = [(f"{alias}.{n}", c.copy().transform(swap)) for n, c in calls.values()]
    return inner


def _renamed(
    ctx: Context,
    alias: str,
    plan: Plan,
    outer: list[exp.Expression],
    theta: exp.Expression | None,
) -> Inner:
    exprs = tuple((f"{alias}.{n}", ref(n)) for n in plan.schema.names)
    renamed = ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))
    pairs = [(o, f"{alias}.__k{i}") for i, o in enumerate(outer)]
    values = [n for n, _ in exprs]
    return Inner(alias=alias, plan=renamed, values=values, pairs=pairs, theta=theta)


def _pair(
    term: exp.Expression, is_outer: Callable[[exp.Expression], bool]
) -> tuple[exp.Expression, exp.Expression] | None:
    """(outer side, inner side) of ``outer = inner``, or None for any other conjunct."""
    if not isinstance(term, exp.EQ):
        return None
    for a, b in ((term.left, term.right), (term.right, term.left)):
        a_cols = list(a.find_all(exp.Column))
        b_cols = list(b.find_all(exp.Column))
        if a_cols and b_cols and all(map(is_outer, a_cols)) and not any(map(is_outer, b_cols)):
            return a, b
    return None


def _outside_calls(expression: exp.Expression) -> list[exp.Column]:
    """The columns of ``expression`` that are not inside an aggregate call."""
    inside = {id(c) for call in calls_in(expression) for c in call.find_all(exp.Column)}
    return [c for c in expression.find_all(exp.Column) if id(c) not in inside]


def one_value(ctx: Context, inner: Inner, node: exp.Expression, count: int = 1) -> None:
    """SqlError unless the subquery has ``count`` columns."""
    if len(inner.values) != count:
        construct = ctx.locator.describe("subquery", node)
        raise SqlError(f"{construct} must return {count} column(s), not {len(inner.values)}")
