"""GROUP BY and aggregate calls: Project (keys, inputs) → Aggregate, outputs rewritten over it.

The pre-aggregation projection computes every group key (``__k<n>``), every
argument and ORDER BY expression of a call (``__a<n>``, one column per distinct
SQL text) and every FILTER condition (``__f<n>``); each distinct call becomes
one ``AggregateCall`` (``__g<n>``) over those columns. The SELECT list and
HAVING are then rewritten to read keys and calls by name. A GROUP BY without
calls is a DISTINCT of its keys, and planned as one (``Distinct``).

Grouping sets (``ivm.sql_frontend.planner.grouping_sets``) become a UNION ALL of
one Aggregate per set over the same projection, each padded to every key: a key
outside the set is NULL of its type, and each ``GROUPING(…)`` call
(``__grouping<n>``) the constant bit mask of the set (bit set: not grouped,
first argument highest). HAVING and the SELECT list then read the union.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError
from ivm.operators.aggregate import Aggregate, AggregateCall, SortKey
from ivm.operators.distinct import Distinct
from ivm.operators.project import Project
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.aggregate_calls import is_call, take_apart
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.positions import Locator

Outputs = list[tuple[str, exp.Expression]]


def sql_text(expression: exp.Expression) -> str:
    """The text expressions are told apart by (equal text, same value)."""
    return expression.sql(dialect="duckdb")


class _Calls:
    """The calls of one GROUP BY and the input columns they read."""

    def __init__(self, keys: list[exp.Expression], locator: Locator) -> None:
        self.locator = locator
        self.key_names = {sql_text(k): f"__k{i}" for i, k in enumerate(keys)}
        self.pre: Outputs = [(name, k) for k, name in zip(keys, self.key_names.values(),
                                                            strict=True)]
        self.calls: dict[str, AggregateCall] = {}
        self.groupings: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.inputs: dict[str, str] = {}
        self.conditions: dict[str, str] = {}

    def _column(self, expression: exp.Expression, names: dict[str, str], prefix: str) -> str:
        text = sql_text(expression)
        if text not in names:
            names[text] = f"{prefix}{len(names)}"
            self.pre.append((names[text], expression))
        return names[text]

    def call(self, node: exp.Expression) -> AggregateCall:
        """The AggregateCall for the call ``node`` (one per distinct call text)."""
        text = sql_text(node)
        if text not in self.calls:
            parts = take_apart(node, self.locator)
            order = tuple(
                SortKey(
                    self._column(term.this, self.inputs, "__a"),
                    descending=bool(term.args.get("desc")),
                    nulls_first=bool(term.args.get("nulls_first")),
                )
                for term in parts.order
            )
            condition = parts.condition
            self.calls[text] = AggregateCall(
                name=f"__g{len(self.calls)}",
                func=parts.func,
                args=tuple(self._column(c, self.inputs, "__a") for c in parts.columns),
                constants=tuple(c.copy() for c in parts.constants),
                distinct=parts.distinct,
                filter=(
                    self._column(condition, self.conditions, "__f")
                    if condition is not None
                    else None
                ),
                order=order,
            )
        return self.calls[text]

    def grouping(self, node: exp.Expression) -> str:
        """The column of a ``GROUPING(…)`` call; SqlError for an argument that is no key."""
        text = sql_text(node)
        if text not in self.groupings:
            names = []
            for argument in node.expressions:
                name = self.key_names.get(sql_text(argument))
                if name is None:
                    raise SqlError(
                        f"{self.locator.describe('GROUPING argument', argument)} must be a "
                        "GROUP BY expression"
                    )
                names.append(name)
            self.groupings[text] = (f"__grouping{len(self.groupings)}", tuple(names))
        return self.groupings[text][0]

    def over_aggregate(self, expression: exp.Expression) -> exp.Expression:
        """``expression`` reading group keys and calls by name; SqlError for a column that is
        neither grouped nor aggregated."""

        def replace(n: exp.Expression) -> exp.Expression:
            text = sql_text(n)
            if text in self.key_names:
                return ref(self.key_names[text], n)
            if isinstance(n, (exp.Grouping, exp.GroupingId)):
                return ref(self.grouping(n), n)
            if is_call(n):
                return ref(self.call(n).name, n)
            return n

        rewritten = expression.copy().transform(replace)
        for column in rewritten.find_all(exp.Column):
            # __sq…: a subquery's placeholder, evaluated after the aggregation.
            if not column.name.startswith(("__k", "__g", "__sq")):
                token = self.locator.token_at(column)
                name = token.text if token is not None else column.name
                raise SqlError(
                    f"{self.locator.describe('column ' + repr(name), column, name)} must appear "
                    "in GROUP BY or be used in an aggregate function"
                )
        return rewritten


def plan_aggregation(
    ctx: Context,
    plan: Plan,
    keys: list[exp.Expression],
    outputs: Outputs,
    having: exp.Expression | None,
    sets: list[tuple[int, ...]] | None = None,
) -> tuple[Plan, Outputs, exp.Expression | None]:
    """Plan GROUP BY ``keys`` over ``plan`` (by each of ``sets``, positions in ``keys``,
    when given); returns the aggregate and the SELECT list and HAVING condition rewritten
    over its columns."""
    calls = _Calls(keys, ctx.locator)
    new_outputs = [(name, calls.over_aggregate(e)) for name, e in outputs]
    new_having = calls.over_aggregate(having) if having is not None else None
    key_names = list(calls.key_names.values())
    sets = [tuple(range(len(keys)))] if sets is None else sets
    if not calls.calls and any(not s for s in sets):
        calls.call(exp.Count(this=exp.Star()))  # a global row needs a column
    # COUNT(*) alone: keep one constant column so the input has a row shape.
    pre = calls.pre or [("__one", exp.Literal.number(1))]
    plan = ctx.typed(Project(schema=plan.schema, input=plan, exprs=tuple(pre)))
    parts = []
    for grouping_set in sets:
        grouped = tuple(key_names[i] for i in grouping_set)
        aggregate = _grouped(ctx, plan, grouped, calls)
        parts.append(_padded(ctx, aggregate, plan, calls, key_names, grouped))
    if len(parts) == 1:
        return parts[0], new_outputs, new_having
    union = UnionAll(schema=parts[0].schema, parts=tuple(parts))
    return ctx.typed(union), new_outputs, new_having


def _grouped(ctx: Context, pre: Plan, grouped: tuple[str, ...], calls: _Calls) -> Plan:
    """GROUP BY ``grouped`` over the projection ``pre``: the Aggregate of the calls, or,
    with none, the distinct keys (the same rows, and a Distinct keeps less state: its
    input's weights, no group versions)."""
    if calls.calls:
        return ctx.typed(Aggregate(
            schema=pre.schema, input=pre, keys=grouped, calls=tuple(calls.calls.values())
        ))
    keys = pre
    if list(grouped) != pre.schema.names:  # a grouping set: only its keys
        exprs = tuple((k, ref(k)) for k in grouped)
        keys = ctx.typed(Project(schema=pre.schema, input=pre, exprs=exprs))
    return ctx.typed(Distinct(schema=keys.schema, input=keys))


def _padded(
    ctx: Context,
    aggregate: Plan,
    pre: Plan,
    calls: _Calls,
    key_names: list[str],
    grouped: tuple[str, ...],
) -> Plan:
    """``aggregate`` (by the keys ``grouped``) with every key, absent ones NULL, and its
    ``GROUPING(…)`` constants; as it is for a plain GROUP BY without GROUPING calls."""
    if list(grouped) == key_names and not calls.groupings:
        return aggregate
    exprs: list[tuple[str, exp.Expression]] = [
        (k, ref(k) if k in grouped
         else exp.cast(exp.null(), pre.schema.type_of(k), dialect="duckdb"))
        for k in key_names
    ]
    exprs += [(c.name, ref(c.name)) for c in calls.calls.values()]
    for name, arguments in calls.groupings.values():
        mask = sum(1 << (len(arguments) - 1 - i)
                   for i, a in enumerate(arguments) if a not in grouped)
        exprs.append((name, exp.cast(exp.Literal.number(mask), "BIGINT")))
    return ctx.typed(Project(schema=aggregate.schema, input=aggregate, exprs=tuple(exprs)))
