"""Window functions, QUALIFY and DISTINCT ON: after HAVING, before the SELECT list.

A SELECT computes its window functions over the rows FROM, WHERE, GROUP BY and
HAVING leave, then filters by QUALIFY, then keeps one row per DISTINCT ON key,
then evaluates its SELECT list. Planned in that order, over those rows:

* every distinct OVER call of the SELECT list and QUALIFY (named windows are already
  inlined: ``ivm.sql_frontend.named_windows``) becomes a ``WindowCall`` named
  ``__win<i>``; its PARTITION BY expressions, arguments, ORDER BY terms and FILTER
  conditions are columns of one projection before the windows (``__wk<i>``,
  ``__wa<i>``, ``__wf<i>``; a column the rows already have is read as it is);
* calls with the same PARTITION BY share one ``Window`` node (``ivm.operators.window``);
  different ones stack, in the order they first appear;
* QUALIFY is a ``Filter`` over them;
* DISTINCT ON (…) is a ``DistinctOn`` (``ivm.operators.distinct_on``) keyed by its
  expressions (``__dk<i>``), picking the first row by the SELECT's ORDER BY
  (``__do<i>``); a name of the SELECT list there means its expression, as in DuckDB.

``window_operands`` lists QUALIFY's condition, DISTINCT ON's expressions and its
ORDER BY as extra SELECT-list entries, so that a grouped SELECT rewrites them over
its aggregate as it rewrites the SELECT list (``RANK() OVER (ORDER BY COUNT(*))``
reads the aggregate's column); ``plan_windows`` takes them off again.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.aggregate import AggregateCall, SortKey
from ivm.operators.distinct_on import DistinctOn
from ivm.operators.filter import Filter
from ivm.operators.project import Project
from ivm.operators.window import AGGREGATE, Window, WindowCall
from ivm.plan.node import Plan
from ivm.sql_frontend.planner.aggregate_calls import (
    CallParts,
    function_name,
    in_scope,
    is_aggregate,
    is_call,
    take_apart,
)
from ivm.sql_frontend.planner.context import Context
from ivm.sql_frontend.planner.grouping import sql_text
from ivm.sql_frontend.planner.naming import ref
from ivm.sql_frontend.positions import Locator

Outputs = list[tuple[str, exp.Expression]]

FUNCTIONS: dict[type[exp.Expression], str] = {
    exp.RowNumber: "row_number",
    exp.Rank: "rank",
    exp.DenseRank: "dense_rank",
    exp.PercentRank: "percent_rank",
    exp.CumeDist: "cume_dist",
    exp.Ntile: "ntile",
    exp.Lag: "lag",
    exp.Lead: "lead",
    exp.FirstValue: "first_value",
    exp.LastValue: "last_value",
    exp.NthValue: "nth_value",
}
"""sqlglot's window-function classes and the ``WindowCall.function`` each one is."""

ARGUMENTS = ("this", "offset", "default")
"""sqlglot's names of a window function's arguments, in SQL order."""

ARBITRARY_OVER_WINDOW = frozenset({"mode", "arg_min", "arg_max"})
"""Aggregates whose deterministic form (``AggregateCall.sql``) DuckDB cannot compute over a
window, so their ties would be DuckDB's arbitrary choice."""

CLAUSES = {"where": "WHERE", "group": "GROUP BY", "having": "HAVING", "joins": "JOIN"}

QUALIFY = "__qualify"


# -- checks before planning ----------------------------------------------------------------


def check_window(window: exp.Window, locator: Locator) -> None:
    """UnsupportedSQL for an OVER clause ivm does not maintain (SqlError where DuckDB
    refuses it too): one outside the SELECT list and QUALIFY, or a function it does not
    know. A named window's definition (``WINDOW w AS (…)``) is checked where it is used."""
    if window.arg_key == "windows":
        return
    child, parent = window, window.parent
    while parent is not None and not isinstance(parent, exp.Query):
        if isinstance(parent, exp.Window) or is_call(parent):
            inside = "a window function" if isinstance(parent, exp.Window) else "an aggregate"
            raise SqlError(f"{locator.describe('window function', window)} inside {inside}: "
                           "not allowed")
        child, parent = parent, parent.parent
    place = child.arg_key
    if place == "order":
        raise UnsupportedSQL(f"{locator.describe('window function in ORDER BY', window)} is "
                             "not supported: compute it in the SELECT list")
    if not isinstance(parent, exp.Select) or place not in ("expressions", "qualify"):
        clause = CLAUSES.get(place, place.upper())
        raise SqlError(f"{locator.describe('window function in ' + clause, window)}: not "
                       "allowed there (use QUALIFY)")
    function_of(window, locator)


def function_of(window: exp.Window, locator: Locator) -> tuple[str, exp.Expression, bool]:
    """The window's function: (its ``WindowCall.function`` name, its node, IGNORE NULLS);
    UnsupportedSQL for one ivm does not maintain."""
    node, ignore = window.this, False
    if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)):
        node, ignore = node.this, isinstance(node, exp.IgnoreNulls)
    if type(node) not in FUNCTIONS and (
        is_aggregate(node) or isinstance(node, (exp.Filter, exp.WithinGroup))
    ):
        parts = take_apart(node, locator)
        if parts.func in ARBITRARY_OVER_WINDOW or ignore:
            what = f"{function_name(node, locator)}{' IGNORE NULLS' if ignore else ''}"
            raise UnsupportedSQL(
                f"{locator.describe(what + ' over a window', node)} is not supported"
            )
        return AGGREGATE, node, False
    name = FUNCTIONS.get(type(node))
    if name is None:
        what = f"window function {function_name(node, locator)}"
        raise UnsupportedSQL(f"{locator.describe(what, node)} is not supported")
    if node.args.get("expressions") or node.args.get("from_first") is not None or any(
        isinstance(a, exp.Order) for a in node.iter_expressions()
    ):
        what = f"{function_name(node, locator)} with these arguments (ORDER BY, FROM FIRST)"
        raise UnsupportedSQL(f"{locator.describe(what, node)} is not supported")
    return name, node, ignore


def windowing(select: exp.Expression) -> tuple[str, exp.Expression] | None:
    """The first window function, QUALIFY or DISTINCT ON of ``select`` itself (not of the
    queries nested in it), named, and the node an error points at (a window's function:
    in a qualified tree, names sqlglot added carry the position of their alias); None when
    it has none."""
    if not isinstance(select, exp.Select):
        return None
    on = distinct_on(select)
    if on is not None:
        return "DISTINCT ON", select.args["distinct"]
    qualify = select.args.get("qualify")
    if qualify is not None:
        window = _first_window(qualify)
        return "QUALIFY", window.this if window is not None else qualify
    for expression in select.expressions:
        window = _first_window(expression)
        if window is not None:
            return "window function", window.this
    return None


def _first_window(expression: exp.Expression) -> exp.Window | None:
    return next((n for n in in_scope(expression) if isinstance(n, exp.Window)), None)


# -- planning ------------------------------------------------------------------------------


def distinct_on(select: exp.Select) -> exp.Tuple | None:
    """The expressions of ``SELECT DISTINCT ON (…)``, None for another SELECT."""
    distinct = select.args.get("distinct")
    return distinct.args.get("on") if distinct is not None else None


def window_operands(select: exp.Select) -> Outputs:
    """QUALIFY's condition, then DISTINCT ON's expressions and the ORDER BY that picks its
    rows, as SELECT-list entries to plan after it (see the module docstring)."""
    extras: Outputs = []
    qualify = select.args.get("qualify")
    if qualify is not None:
        extras.append((QUALIFY, qualify.this))
    on = distinct_on(select)
    if on is not None:
        aliases = {e.alias.lower(): e.this for e in select.expressions if isinstance(e, exp.Alias)}
        extras += [(f"__dk{i}", _aliased(e, aliases)) for i, e in enumerate(on.expressions)]
        extras += [(f"__do{i}", _aliased(t.this, aliases)) for i, t in enumerate(_order(select))]
    return extras


def plan_windows(ctx: Context, select: exp.Select, plan: Plan, outputs: Outputs
                 ) -> tuple[Plan, Outputs]:
    """``plan`` with the windows, QUALIFY and DISTINCT ON of ``select`` planned over it, and
    ``outputs`` (its SELECT list and ORDER BY's hidden columns, then ``window_operands``)
    rewritten over them, without the window operands."""
    windows: dict[str, exp.Window] = {}
    for _, expression in outputs:
        for node in in_scope(expression):
            if isinstance(node, exp.Window):
                windows.setdefault(sql_text(node), node)
    if windows:
        plan, columns = _windows(ctx, plan, list(windows.values()))
        outputs = [(name, _read(e, columns)) for name, e in outputs]
    kept = len(outputs) - len(window_operands(select))
    selected, extras = outputs[:kept], dict(outputs[kept:])
    if QUALIFY in extras:
        plan = ctx.typed(Filter(schema=plan.schema, input=plan, predicate=extras[QUALIFY]))
    keys = [e for name, e in extras.items() if name.startswith("__dk")]
    if keys:
        pre = _Columns(plan)
        on = tuple(dict.fromkeys(pre.column(k, "__dk") for k in keys))
        order = [e for name, e in extras.items() if name.startswith("__do")]
        sort = tuple(_sort_key(pre.column(e, "__do"), term)
                     for e, term in zip(order, _order(select), strict=True))
        plan = pre.project(ctx, plan)
        plan = ctx.typed(DistinctOn(schema=plan.schema, input=plan, keys=on, order=sort))
    return plan, selected


def _windows(ctx: Context, plan: Plan, windows: list[exp.Window]
             ) -> tuple[Plan, dict[str, str]]:
    """The Window nodes computing ``windows`` over ``plan``, and each window's column by its
    text."""
    pre = _Columns(plan)
    groups: dict[tuple[str, ...], list[WindowCall]] = {}
    columns: dict[str, str] = {}
    for i, window in enumerate(windows):
        name = f"__win{i}"
        partition = tuple(dict.fromkeys(
            pre.column(e, "__wk") for e in window.args.get("partition_by") or []))
        groups.setdefault(partition, []).append(_call(ctx, window, name, pre))
        columns[sql_text(window)] = name
    plan = pre.project(ctx, plan)
    for partition, calls in groups.items():
        plan = ctx.typed(Window(schema=plan.schema, input=plan, partition=partition,
                                calls=tuple(calls)))
    return plan, columns


def _call(ctx: Context, window: exp.Window, name: str, pre: _Columns) -> WindowCall:
    """One OVER call as a ``WindowCall`` over ``pre``'s columns."""
    function, node, ignore = function_of(window, ctx.locator)
    frame = window.args.get("spec")
    if frame is not None:
        _check_frame(frame, window, ctx.locator)
        frame = frame.copy()
    order = tuple(_sort_key(pre.column(t.this, "__wa"), t) for t in _terms(window))
    if function == AGGREGATE:
        parts = take_apart(node, ctx.locator)
        return WindowCall(name, AGGREGATE, aggregate=_aggregate(name, parts, pre),
                          order=order, frame=frame)
    args = tuple(
        a.copy() if _constant(a) else ref(pre.column(a, "__wa"), a)
        for a in (node.args.get(key) for key in ARGUMENTS) if a is not None
    )
    return WindowCall(name, function, args=args, ignore_nulls=ignore, order=order, frame=frame)


def _aggregate(name: str, parts: CallParts, pre: _Columns) -> AggregateCall:
    condition = parts.condition
    return AggregateCall(
        name=name,
        func=parts.func,
        args=tuple(pre.column(c, "__wa") for c in parts.columns),
        constants=tuple(c.copy() for c in parts.constants),
        distinct=parts.distinct,
        filter=pre.column(condition, "__wf") if condition is not None else None,
        order=tuple(_sort_key(pre.column(t.this, "__wa"), t) for t in parts.order),
    )


def _check_frame(frame: exp.Expression, window: exp.Window, locator: Locator) -> None:
    """UnsupportedSQL for a ROWS frame that excludes peers: ivm breaks ties in a ROWS frame's
    order (see ``ivm.operators.window``), which would leave no peers to exclude."""
    exclude = frame.args.get("exclude")
    kind = str(frame.args.get("kind") or "").upper()
    if kind == "ROWS" and exclude is not None and exclude.name.upper() in ("GROUP", "TIES"):
        what = f"ROWS frame with EXCLUDE {exclude.name.upper()}"
        raise UnsupportedSQL(f"{locator.describe(what, window)} is not supported: use a RANGE "
                             "or GROUPS frame")


class _Columns:
    """Expressions read as columns of a projection over ``plan`` (each distinct text once;
    a column ``plan`` has is read as it is)."""

    def __init__(self, plan: Plan) -> None:
        self.existing = set(plan.schema.names)
        self.added: dict[str, tuple[str, exp.Expression]] = {}

    def column(self, expression: exp.Expression, prefix: str) -> str:
        if isinstance(expression, exp.Column) and expression.name in self.existing:
            return expression.name
        text = sql_text(expression)
        if text not in self.added:
            self.added[text] = (f"{prefix}{len(self.added)}", expression)
        return self.added[text][0]

    def project(self, ctx: Context, plan: Plan) -> Plan:
        """``plan`` with the added columns after its own."""
        if not self.added:
            return plan
        exprs = tuple((n, ref(n)) for n in plan.schema.names) + tuple(self.added.values())
        return ctx.typed(Project(schema=plan.schema, input=plan, exprs=exprs))


def _read(expression: exp.Expression, columns: dict[str, str]) -> exp.Expression:
    """``expression`` reading each window's column instead of computing it."""
    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Window) and sql_text(node) in columns:
            return ref(columns[sql_text(node)], node)
        return node

    return expression.transform(replace)


def _aliased(expression: exp.Expression, aliases: dict[str, exp.Expression]) -> exp.Expression:
    """``expression`` with SELECT-list names replaced by their expressions (``qualify`` has
    qualified every other column)."""
    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
            return aliases[node.name.lower()].copy()
        return node

    return expression.transform(replace)


def _order(select: exp.Select) -> list[exp.Ordered]:
    order = select.args.get("order")
    return list(order.expressions) if order is not None else []


def _terms(window: exp.Window) -> list[exp.Ordered]:
    order = window.args.get("order")
    return list(order.expressions) if order is not None else []


def _sort_key(column: str, term: exp.Ordered) -> SortKey:
    return SortKey(column, bool(term.args.get("desc")), bool(term.args.get("nulls_first")))


def _constant(expression: exp.Expression) -> bool:
    """A literal argument (an offset, a default, a bucket count), kept in the call's text."""
    if isinstance(expression, exp.Neg):
        expression = expression.this
    return isinstance(expression, (exp.Literal, exp.Null, exp.Boolean))
