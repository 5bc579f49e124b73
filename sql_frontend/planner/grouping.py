"""GROUP BY and aggregate calls: Project (keys, inputs) → Aggregate, outputs rewritten over it.

The pre-aggregation projection computes every group key (``__k<n>``), every
argument and ORDER BY expression of a call (``__a<n>``, one column per distinct
SQL text) and every FILTER condition (``__f<n>``); each distinct call becomes
one ``AggregateCall`` (``__g<n>``) over those columns. The SELECT list and
HAVING are then rewritten to read keys and calls by name.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError
from ivm.operators.aggregate import Aggregate, AggregateCall, SortKey
from ivm.operators.project import Project
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

    def over_aggregate(self, expression: exp.Expression) -> exp.Expression:
        """``expression`` reading group keys and calls by name; SqlError for a column that is
        neither grouped nor aggregated."""

        def replace(n: exp.Expression) -> exp.Expression:
            text = sql_text(n)
            if text in self.key_names:
                return ref(self.key_names[text], n)
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
) -> tuple[Plan, Outputs, exp.Expression | None]:
    """Plan GROUP BY ``keys`` over ``plan``; returns the aggregate and the SELECT list and
    HAVING condition rewritten over its columns."""
    calls = _Calls(keys, ctx.locator)
    new_outputs = [(name, calls.over_aggregate(e)) for name, e in outputs]
    new_having = calls.over_aggregate(having) if having is not None else None
    # COUNT(*) alone: keep one constant column so the input has a row shape.
    pre = calls.pre or [("__one", exp.Literal.number(1))]
    plan = ctx.typed(Project(schema=plan.schema, input=plan, exprs=tuple(pre)))
    aggregate = Aggregate(
        schema=plan.schema,
        input=plan,
        keys=tuple(calls.key_names.values()),
        calls=tuple(calls.calls.values()),
    )
    return ctx.typed(aggregate), new_outputs, new_having
