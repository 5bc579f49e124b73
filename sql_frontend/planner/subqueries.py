"""Subqueries in WHERE, SELECT, HAVING and JOIN … ON, decorrelated into joins.

A top-level WHERE conjunct ``EXISTS``, ``NOT EXISTS`` or ``x IN (…)`` is a filter: a
semi-join or anti-join (``semi_joins``). Any other subquery is a *value*: its columns are
joined to the rows it is evaluated on (a left join to a one-row-per-key relation, or a
cross join to a one-row one) and the subquery is replaced by an expression over them:

* EXISTS: a match flag (equality correlation: Distinct of the keys; any other
  correlation: the distinct outer rows that match, joined back null-safely);
* ``x IN (…)`` / ``= ANY``: a flag for ``x`` among the non-NULL values of its key, and
  per key the number of rows and of non-NULL values (SQL's three-valued logic);
  ``NOT IN`` / ``<> ALL`` is its negation;
* ``x < ANY / ALL (…)`` and the other comparisons: per key the number of rows and of
  non-NULL values, MIN and MAX;
* a scalar aggregate subquery: the aggregate grouped by the correlation keys, over no
  rows where a key has no group (COUNT 0, others NULL);
* any other scalar subquery: per key the number of rows and MIN of the value; more than
  one row raises DuckDB's own error when evaluated.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import UnsupportedSQL
from ivm.operators.distinct import Distinct
from ivm.operators.filter import Filter
from ivm.operators.guard import Guard
from ivm.operators.join import conjuncts
from ivm.operators.project import Project
from ivm.plan.node import Plan
from ivm.sql_frontend.planner import subquery_joins as sj
from ivm.sql_frontend.planner.aggregate_calls import has_aggregate
from ivm.sql_frontend.planner.context import Context, Scope
from ivm.sql_frontend.planner.decorrelate import Inner, Resolve, decorrelate, one_value
from ivm.sql_frontend.planner.decorrelate import plan_resolver as plan_resolver
from ivm.sql_frontend.planner.grouping import plan_aggregation
from ivm.sql_frontend.planner.join_filters import filtered
from ivm.sql_frontend.planner.naming import ref, rename_columns
from ivm.sql_frontend.planner.semi_joins import anti_join, semi_join
from ivm.sql_frontend.planner.semi_joins import join as join_plans

COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
TOO_MANY_ROWS = "More than one row returned by a subquery used as an expression"


def is_construct(node: exp.Expression) -> bool:
    """True for the outermost node of a subquery in an expression."""
    if isinstance(node, exp.Exists):
        return True
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return True
    if isinstance(node, COMPARISONS) and isinstance(node.expression, (exp.Any, exp.All)):
        return True
    return isinstance(node, exp.Subquery) and not isinstance(
        node.parent,
        (exp.In, exp.Exists, exp.Any, exp.All, exp.From, exp.Join, exp.SetOperation, exp.Subquery),
    )


def first_construct(expression: exp.Expression) -> exp.Expression | None:
    """The outermost subquery construct of ``expression`` (breadth first), if any."""
    return next((n for n in expression.bfs() if is_construct(n)), None)


def has_subquery(expression: exp.Expression | None) -> bool:
    """True when ``expression`` holds a subquery."""
    return expression is not None and first_construct(expression) is not None


def plan_where(ctx: Context, plan: Plan, predicate: exp.Expression, scope: Scope) -> Plan:
    """``plan`` filtered by the (qualified, not renamed) ``predicate``: plain conjuncts
    first, then semi/anti-joins, then conjuncts over subquery values."""
    plain, joins, valued = [], [], []
    for term in conjuncts(predicate):
        core, negated = _core(term)
        if isinstance(core, exp.Exists) or (
            isinstance(core, exp.In) and core.args.get("query") is not None and not negated
        ):
            joins.append((core, negated))
        else:
            (valued if has_subquery(term) else plain).append(term)
    if plain:
        plan = filtered(ctx, plan, rename_columns(exp.and_(*plain)))
    for core, negated in joins:
        plan = _semi(ctx, plan, core, negated, scope)
    if valued:
        plan, value = with_values(ctx, plan, exp.and_(*valued), scope)
        plan, rest = sj.keyed_by_values(plan, rename_columns(value))
        if rest is not None:
            plan = ctx.typed(Filter(schema=plan.schema, input=plan, predicate=rest))
    return plan


def _core(term: exp.Expression) -> tuple[exp.Expression, bool]:
    negated = False
    while isinstance(term, (exp.Paren, exp.Not)):
        negated ^= isinstance(term, exp.Not)
        term = term.this
    return term, negated


def _semi(ctx: Context, plan: Plan, core: exp.Expression, negated: bool, scope: Scope) -> Plan:
    """``plan`` semi-joined (anti-joined when ``negated``) with an EXISTS / IN subquery."""
    query = core.this if isinstance(core, exp.Exists) else core.args["query"]
    inner = decorrelate(ctx, plan_resolver(plan), query, scope, aggregate=False)
    pairs = list(inner.pairs)
    if isinstance(core, exp.In):
        operand = core.this
        xs = operand.expressions if isinstance(operand, exp.Tuple) else [operand]
        one_value(ctx, inner, query, len(xs))
        pairs += [(rename_columns(x), v) for x, v in zip(xs, inner.values, strict=True)]
    build = anti_join if negated else semi_join
    return build(ctx, plan, inner.plan, sj.condition(pairs, inner.theta))


def with_values(
    ctx: Context,
    plan: Plan,
    expression: exp.Expression,
    scope: Scope,
    resolve: Resolve | None = None,
) -> tuple[Plan, exp.Expression]:
    """``plan`` with the columns ``expression``'s subqueries need, and ``expression`` with
    each subquery replaced by its value over them. ``resolve`` maps the enclosing query's
    columns onto ``plan`` (default: ``alias.column`` by name)."""
    holder = exp.Paren(this=expression.copy())
    while (node := first_construct(holder)) is not None:
        plan, value = value_of(ctx, plan, node, scope, resolve or plan_resolver(plan))
        # A column needs no parentheses, and bare it can key a join (``x = (SELECT
        # MAX…)`` compares with a column of the joined value: an equi-join, read at keys).
        node.replace(value if isinstance(value, exp.Column) else exp.Paren(this=value))
    return plan, holder.this


def value_of(
    ctx: Context, plan: Plan, node: exp.Expression, scope: Scope, resolve: Resolve
) -> tuple[Plan, exp.Expression]:
    """The columns one subquery construct needs, joined to ``plan``, and its value."""
    if isinstance(node, exp.Exists):
        return _exists(ctx, plan, node, scope, resolve)
    if isinstance(node, exp.In):
        return _in(ctx, plan, node.this, node.args["query"], scope, resolve)
    if isinstance(node, COMPARISONS) and isinstance(node.expression, (exp.Any, exp.All)):
        return _quantified(ctx, plan, node, scope, resolve)
    return _scalar(ctx, plan, node, scope, resolve)


def _join(ctx: Context, plan: Plan, inner: Inner, columns: Plan) -> Plan:
    """``plan`` with ``columns`` (one row per key of ``inner``'s pairs) joined on."""
    if not inner.pairs:
        return sj.cross_join_one_row(ctx, plan, columns)
    return sj.left_join_unique(ctx, plan, columns, inner.pairs)


def aggregate(
    ctx: Context, plan: Plan, keys: list[str], calls: list[tuple[str, exp.Expression]]
) -> Plan:
    """GROUP BY the columns ``keys`` of ``plan`` with aggregate ``calls`` (named, over
    ``plan``'s columns); columns: the keys, then the calls. Without keys: one row."""
    key_exprs: list[exp.Expression] = [ref(k) for k in keys]
    result, outputs, _ = plan_aggregation(ctx, plan, key_exprs, calls, None)
    exprs = tuple((k, ref(f"__k{i}")) for i, k in enumerate(keys)) + tuple(outputs)
    return ctx.typed(Project(schema=result.schema, input=result, exprs=exprs))


def _with_counts(
    ctx: Context, plan: Plan, inner: Inner, extra: list[tuple[str, exp.Expression]]
) -> Plan:
    """``plan`` with, per key of ``inner`` (per correlation value), the subquery's rows
    ``n``, its non-NULL values ``nv``, and ``extra`` (NULL where it has no rows)."""
    value = ref(inner.values[0])
    calls = [(f"{inner.alias}.__n", exp.Count(this=exp.Star())),
             (f"{inner.alias}.__nv", exp.Count(this=value))] + extra
    return per_correlation(ctx, plan, inner, calls)


def per_correlation(
    ctx: Context, plan: Plan, inner: Inner, calls: list[tuple[str, exp.Expression]],
    flag: str | None = None,
) -> Plan:
    """``plan`` with the aggregate ``calls`` over the subquery's rows that each of its
    rows correlates with (NULL where none does), and ``flag`` TRUE where some does.

    Equality correlation: the calls grouped by the inner keys, left-joined on them.
    Any other (``inner.theta``): grouped per distinct value of the outer columns the
    correlation reads (``outer_values``' D, joined to the subquery's rows by the
    correlation), left-joined back null-safely. Uncorrelated: one row, cross-joined."""
    if inner.theta is None:
        grouped = aggregate(ctx, inner.plan, inner.keys, calls)
        if flag is not None:
            grouped = _flagged(ctx, grouped, flag)
        return _join(ctx, plan, inner, grouped)
    on = sj.condition(inner.pairs, inner.theta)
    assert on is not None
    keys, on, back = sj.outer_values(ctx, plan, on, f"{inner.alias}.__g")
    joined = join_plans(ctx, keys, inner.plan, on)
    grouped = aggregate(ctx, joined, list(keys.schema.names), calls)
    renamed = tuple((c, ref(k)) for (_, c), k in zip(back, keys.schema.names, strict=True))
    exprs = renamed + tuple((n, ref(n)) for n, _ in calls)
    if flag is not None:
        exprs += ((flag, exp.true()),)
    grouped = ctx.typed(Project(schema=grouped.schema, input=grouped, exprs=exprs))
    return sj.left_join_unique(ctx, plan, grouped, back, null_safe=True)


def _flagged(ctx: Context, plan: Plan, flag: str) -> Plan:
    exprs = tuple((n, ref(n)) for n in plan.schema.names) + ((flag, exp.true()),)
    return ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))


def matched_per_correlation(
    ctx: Context, plan: Plan, inner: Inner, extra: exp.Expression | None, flag: str
) -> Plan:
    """``plan`` with ``flag`` TRUE where some row of the subquery correlates with its row
    and satisfies ``extra`` (over both), NULL elsewhere: D ⋈ inner made distinct by
    D's columns, left-joined back null-safely (any correlation)."""
    on = sj.condition(inner.pairs, sj.and_all([inner.theta, extra]))
    assert on is not None
    keys, on, back = sj.outer_values(ctx, plan, on, f"{inner.alias}.__m")
    joined = join_plans(ctx, keys, inner.plan, on)
    exprs = tuple((c, ref(k)) for (_, c), k in zip(back, keys.schema.names, strict=True))
    exprs += ((flag, exp.true()),)
    found = ctx.typed(Project(schema=joined.schema, input=joined, exprs=exprs))
    found = ctx.typed(Distinct(schema=found.schema, input=found))
    return sj.left_join_unique(ctx, plan, found, back, null_safe=True)


def _exists(
    ctx: Context, plan: Plan, node: exp.Exists, scope: Scope, resolve: Resolve
) -> tuple[Plan, exp.Expression]:
    inner = decorrelate(ctx, resolve, node.this, scope, aggregate=False)
    flag = ref(inner.flag)
    if inner.theta is not None:
        on = sj.condition(inner.pairs, inner.theta)
        prefix = f"{inner.alias}.m."
        matched, pairs = sj.theta_matches(ctx, plan, inner.plan, on, prefix, inner.flag)
        plan = sj.left_join_unique(ctx, plan, matched, pairs, null_safe=True)
        return plan, exp.Not(this=exp.Is(this=flag, expression=exp.null()))
    if not inner.pairs:
        counts = aggregate(ctx, inner.plan, [], [(inner.flag, exp.Count(this=exp.Star()))])
        return sj.cross_join_one_row(ctx, plan, counts), exp.GT(
            this=flag, expression=exp.Literal.number(0)
        )
    exprs = tuple((k, ref(k)) for k in inner.keys) + ((inner.flag, exp.true()),)
    keys = ctx.typed(Project(schema=inner.plan.schema, input=inner.plan, exprs=exprs))
    keys = ctx.typed(Distinct(schema=keys.schema, input=keys))
    plan = sj.left_join_unique(ctx, plan, keys, inner.pairs)
    return plan, exp.Not(this=exp.Is(this=flag, expression=exp.null()))


def _in(
    ctx: Context,
    plan: Plan,
    operand: exp.Expression,
    query: exp.Expression,
    scope: Scope,
    resolve: Resolve,
) -> tuple[Plan, exp.Expression]:
    """``operand IN (query)`` as a three-valued boolean."""
    if isinstance(operand, exp.Tuple):
        construct = ctx.locator.describe("multi-column IN as a value", operand)
        raise UnsupportedSQL(f"{construct} is not supported (only as a WHERE conjunct)")
    inner = _rows(ctx, resolve, query, scope)
    x = rename_columns(operand)
    value = ref(inner.values[0])
    if inner.theta is not None:
        member = exp.EQ(this=x.copy(), expression=value.copy())
        plan = matched_per_correlation(ctx, plan, inner, member, inner.flag)
    else:
        present = ctx.typed(Filter(
            schema=inner.plan.schema, input=inner.plan,
            predicate=exp.Not(this=exp.Is(this=value, expression=exp.null()))))
        members = [(f"{c}#m", ref(c)) for c in [*inner.keys, inner.values[0]]]
        exprs = tuple(members) + ((inner.flag, exp.true()),)
        found = ctx.typed(Project(schema=present.schema, input=present, exprs=exprs))
        found = ctx.typed(Distinct(schema=found.schema, input=found))
        pairs = [(o, f"{c}#m") for o, c in inner.pairs] + [(x, f"{inner.values[0]}#m")]
        plan = sj.left_join_unique(ctx, plan, found, pairs)
    plan = _with_counts(ctx, plan, inner, [])
    n, nv = ref(f"{inner.alias}.__n"), ref(f"{inner.alias}.__nv")
    return plan, _case(
        [
            (exp.Not(this=exp.Is(this=ref(inner.flag), expression=exp.null())), exp.true()),
            (exp.EQ(this=exp.func("coalesce", n, exp.Literal.number(0)),
                    expression=exp.Literal.number(0)), exp.false()),
            (exp.or_(exp.Is(this=x.copy(), expression=exp.null()), exp.GT(this=n, expression=nv)),
             exp.null()),
        ],
        exp.false(),
    )


def _rows(ctx: Context, resolve: Resolve, query: exp.Expression, scope: Scope) -> Inner:
    """A one-column subquery, decorrelated."""
    inner = decorrelate(ctx, resolve, query, scope, aggregate=False)
    one_value(ctx, inner, query)
    return inner


EXTREME_FOR_ANY: dict[type[exp.Expression], str] = {
    exp.GT: "__min", exp.GTE: "__min", exp.LT: "__max", exp.LTE: "__max",
}


def _quantified(
    ctx: Context, plan: Plan, node: exp.Expression, scope: Scope, resolve: Resolve
) -> tuple[Plan, exp.Expression]:
    """``x op ANY / ALL (query)`` with SQL's three-valued logic."""
    quantifier = node.expression
    is_all = isinstance(quantifier, exp.All)
    kind = type(node)
    if kind is exp.EQ and not is_all:
        return _in(ctx, plan, node.this, quantifier.this, scope, resolve)
    if kind is exp.NEQ and is_all:
        plan, value = _in(ctx, plan, node.this, quantifier.this, scope, resolve)
        return plan, exp.Not(this=exp.Paren(this=value))
    if kind is exp.NEQ:  # x <> ANY (q) = NOT (x = ALL (q))
        plan, value = _quantified(
            ctx, plan, exp.EQ(this=node.this, expression=exp.All(this=quantifier.this)),
            scope, resolve,
        )
        return plan, exp.Not(this=exp.Paren(this=value))
    inner = _rows(ctx, resolve, quantifier.this, scope)
    value = ref(inner.values[0])
    a = inner.alias
    extra = [(f"{a}.__min", exp.Min(this=value)), (f"{a}.__max", exp.Max(this=value.copy()))]
    plan = _with_counts(ctx, plan, inner, extra)
    x = rename_columns(node.this)
    n, nv = ref(f"{a}.__n"), ref(f"{a}.__nv")
    empty = exp.EQ(this=exp.func("coalesce", n, exp.Literal.number(0)),
                   expression=exp.Literal.number(0))
    null_x = exp.Is(this=x, expression=exp.null())
    has_null = exp.GT(this=n.copy(), expression=nv)
    if kind is exp.EQ:  # = ALL: every value equals x
        differs = exp.or_(exp.NEQ(this=x.copy(), expression=ref(f"{a}.__min")),
                          exp.NEQ(this=x.copy(), expression=ref(f"{a}.__max")))
        return plan, _case([(empty, exp.true()), (null_x, exp.null()), (differs, exp.false()),
                            (has_null, exp.null())], exp.true())
    extreme = EXTREME_FOR_ANY[kind]
    if is_all:  # x > ALL: x > the largest value
        extreme = "__max" if extreme == "__min" else "__min"
        fails = exp.Not(this=kind(this=x.copy(), expression=ref(f"{a}.{extreme}")))
        return plan, _case([(empty, exp.true()), (null_x, exp.null()), (fails, exp.false()),
                            (has_null, exp.null())], exp.true())
    holds = kind(this=x.copy(), expression=ref(f"{a}.{extreme}"))
    return plan, _case([(empty, exp.false()), (null_x, exp.null()), (holds, exp.true()),
                        (has_null, exp.null())], exp.false())


def _scalar(
    ctx: Context, plan: Plan, node: exp.Expression, scope: Scope, resolve: Resolve
) -> tuple[Plan, exp.Expression]:
    """A scalar subquery's value (NULL over no rows; an error over more than one)."""
    query = node.this
    while isinstance(query, exp.Subquery):
        query = query.this
    if (
        isinstance(query, exp.Select) and len(query.expressions) == 1
        and not any(query.args.get(a) for a in ("group", "having", "limit", "offset"))
        and has_aggregate(query.expressions[0])
    ):
        inner = decorrelate(ctx, resolve, query, scope, aggregate=True, outer=plan)
        assert inner.template is not None and inner.empty is not None
        missing = exp.Is(this=ref(inner.flag), expression=exp.null())
        if inner.calls is not None:  # correlated by a non-equality
            plan = per_correlation(ctx, plan, inner, inner.calls, inner.flag)
            return plan, _case([(missing, inner.empty)], inner.template)
        if not inner.pairs:
            return sj.cross_join_one_row(ctx, plan, inner.plan), inner.template
        plan = sj.left_join_unique(ctx, plan, inner.plan, inner.pairs)
        return plan, _case([(missing, inner.empty)], inner.template)
    inner = _rows(ctx, resolve, query, scope)
    first = (f"{inner.alias}.__first", exp.Min(this=ref(inner.values[0])))
    too_many = exp.GT(this=ref(f"{inner.alias}.__n"), expression=exp.Literal.number(1))
    if not inner.pairs and inner.theta is None:
        # Uncorrelated: DuckDB fails whenever the subquery has two rows, whatever the
        # outer rows are, so the check runs on the one-row count itself.
        value = ref(inner.values[0])
        counts = aggregate(ctx, inner.plan, [], [
            (f"{inner.alias}.__n", exp.Count(this=exp.Star())),
            (f"{inner.alias}.__nv", exp.Count(this=value)), first])
        counts = ctx.typed(Guard(counts.schema, counts, too_many, TOO_MANY_ROWS))
        return sj.cross_join_one_row(ctx, plan, counts), ref(first[0])
    # Correlated: only live outer rows whose key has two rows fail (checked on the joined
    # change consolidated, not on its terms: see ivm.operators.guard).
    joined = _with_counts(ctx, plan, inner, [first])
    return ctx.typed(Guard(joined.schema, joined, too_many, TOO_MANY_ROWS)), ref(first[0])


def _case(whens: list[tuple[exp.Expression, exp.Expression]], default: exp.Expression) -> exp.Case:
    case = exp.Case()
    for condition, value in whens:
        case = case.when(condition, value, copy=False)
    return case.else_(default, copy=False)
