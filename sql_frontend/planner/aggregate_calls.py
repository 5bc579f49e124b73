"""Aggregate calls in SQL: which are aggregates, what ivm maintains, and their parts.

sqlglot parses an aggregate call into one of its function classes (``exp.Sum``,
``exp.GroupConcat``…) or, for names it does not know, ``exp.Anonymous``;
``DISTINCT`` is an ``exp.Distinct`` first argument, ``ORDER BY`` inside the
call an ``exp.Order`` wrapping the first argument, ``FILTER (WHERE …)`` an
``exp.Filter`` around the call and ``WITHIN GROUP (ORDER BY …)`` an
``exp.WithinGroup`` around it. ``take_apart`` reads all of that into one
``CallParts`` and checks it against the aggregate-function registry
(``ivm.functions.aggregates``), refusing what ivm does not maintain with
``UnsupportedSQL`` naming the function and where it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.functions.aggregates import AggregateFunction, lookup
from ivm.sql_frontend.duckdb_aggregates import DUCKDB_AGGREGATES
from ivm.sql_frontend.positions import Locator

REGISTRY_NAMES: dict[type[exp.Expression], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.StddevSamp: "stddev_samp",
    exp.Stddev: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.GroupConcat: "string_agg",
    exp.ArrayAgg: "list",
    exp.Median: "median",
    exp.PercentileCont: "quantile_cont",
    exp.PercentileDisc: "quantile_disc",
    exp.Quantile: "quantile_disc",  # DuckDB's QUANTILE is QUANTILE_DISC
    exp.ArgMin: "arg_min",
    exp.ArgMax: "arg_max",
    exp.Mode: "mode",
}
"""sqlglot's aggregate classes and the registry function each one is."""

ANONYMOUS_NAMES: dict[str, str] = {"mean": "avg"}
"""DuckDB aliases sqlglot parses as anonymous functions, and the registry function."""

IGNORED_ARGS = frozenset({"big_int"})
"""sqlglot arguments that are no argument of the SQL call."""

WITHIN_GROUP = frozenset({"quantile_cont", "quantile_disc", "mode"})
"""Functions that may take their column from ``WITHIN GROUP (ORDER BY …)``."""

ARBITRARY_ORDER = (
    "its order is arbitrary, so its value would differ between maintenance and "
    "recomputation: add ORDER BY"
)


@dataclass(frozen=True)
class CallParts:
    """One aggregate call taken apart (expressions of the query it appears in).

    ``func``: the registry name; ``columns``: the arguments evaluated per row;
    ``constants``: literal arguments after them; ``order``: ``ORDER BY`` terms inside
    the call; ``condition``: its ``FILTER (WHERE …)`` condition.
    """

    func: str
    columns: tuple[exp.Expression, ...] = ()
    constants: tuple[exp.Expression, ...] = ()
    distinct: bool = False
    order: tuple[exp.Ordered, ...] = ()
    condition: exp.Expression | None = None

    @property
    def function(self) -> AggregateFunction:
        """The registry entry of ``func``."""
        return lookup(self.func)


def is_aggregate(node: exp.Expression) -> bool:
    """True for an aggregate function call: any sqlglot aggregate class, or a function
    sqlglot does not know that DuckDB knows as an aggregate. ``GROUPING(…)`` is not one:
    it names the grouping set of the row (``ivm.sql_frontend.planner.grouping``)."""
    if isinstance(node, (exp.Grouping, exp.GroupingId)):
        return False
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in DUCKDB_AGGREGATES


def is_call(node: exp.Expression) -> bool:
    """True for the outermost node of an aggregate call (its FILTER or WITHIN GROUP, if any);
    an aggregate computed over a window (``SUM(x) OVER (…)``) is none: it belongs to the
    window (``ivm.sql_frontend.planner.windows``)."""
    if windowed(node):
        return False
    if isinstance(node, (exp.Filter, exp.WithinGroup)):
        return is_aggregate(node.this) or is_call(node.this)
    return is_aggregate(node) and not isinstance(node.parent, (exp.Filter, exp.WithinGroup))


WINDOW_WRAPPERS = (exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls)
"""What may stand between a window function and its ``OVER``."""


def windowed(node: exp.Expression) -> bool:
    """True for the function of an ``OVER`` clause (or its FILTER / IGNORE NULLS wrapper)."""
    while isinstance(node.parent, WINDOW_WRAPPERS) and node.arg_key == "this":
        node = node.parent
    return isinstance(node.parent, exp.Window) and node.arg_key == "this"


def in_scope(expression: exp.Expression) -> Iterator[exp.Expression]:
    """``expression`` and its descendants, not entering nested queries (their aggregates
    are theirs)."""
    stack = [expression]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in node.iter_expressions() if not isinstance(c, exp.Query))


def calls_in(expression: exp.Expression) -> list[exp.Expression]:
    """The aggregate calls of ``expression``'s own query (outermost node of each)."""
    return [n for n in in_scope(expression) if is_call(n)]


def has_aggregate(expression: exp.Expression) -> bool:
    """True when ``expression`` calls an aggregate (outside nested queries and not over a
    window: ``SUM(x) OVER ()`` has none, ``SUM(SUM(x)) OVER ()`` has one)."""
    return any(is_aggregate(n) and not windowed(n) for n in in_scope(expression))


def check_not_nested(call: exp.Expression, locator: Locator) -> None:
    """SqlError when an aggregate's arguments, ORDER BY or FILTER call an aggregate."""
    parts: list[exp.Expression] = []
    inner = call
    while isinstance(inner, (exp.Filter, exp.WithinGroup)):
        parts.extend(c for c in inner.iter_expressions() if c is not inner.this)
        inner = inner.this
    parts.extend(inner.iter_expressions())
    for child in parts:
        if has_aggregate(child):
            raise SqlError(
                f"{locator.describe('nested aggregate', call)}: aggregates cannot be nested"
            )


def function_name(call: exp.Expression, locator: Locator) -> str:
    """The function's name as the user wrote it (upper case)."""
    if isinstance(call, exp.Anonymous):
        return call.name.upper()
    return locator.word_at(call) or call.sql(dialect="duckdb").split("(")[0].upper()


def take_apart(node: exp.Expression, locator: Locator) -> CallParts:
    """The parts of the aggregate call ``node`` (as ``is_call`` finds it), checked
    against the registry: UnsupportedSQL for what ivm does not maintain."""
    call, condition, within = node, None, None
    if isinstance(call, exp.Filter):
        condition = call.expression.this if isinstance(call.expression, exp.Where) else None
        call = call.this
    if isinstance(call, exp.WithinGroup):
        within = call.expression
        call = call.this
    if not is_aggregate(call):
        raise SqlError(f"{locator.describe('FILTER', node)}: only aggregate calls take FILTER")
    named = _Named(call, locator)
    func = _registry_name(call)
    if func is None:
        raise UnsupportedSQL(f"{named('aggregate function {name}')} is not supported")
    function = lookup(func)
    arguments, distinct, order = _arguments(call, named)
    if within is not None:
        arguments = _within_group(within, func, arguments, named)
    if func == "count" and (not arguments or isinstance(arguments[0], exp.Star)):
        func, function = "count_star", lookup("count_star")
        arguments = arguments[1:]
    _check_against(function, arguments, distinct, order, named)
    columns = tuple(arguments[: function.columns])
    constants = tuple(arguments[function.columns :])
    for constant in constants:
        if not _is_literal(constant):
            raise UnsupportedSQL(
                f"{named('{name} with a non-constant argument')} is not supported: "
                f"{constant.sql(dialect='duckdb')} must be a literal"
            )
    return CallParts(func, columns, constants, distinct, order, condition)


class _Named:
    """Describes a construct of one call for an error: ``named('{name} with …')`` with the
    function's name as the user wrote it and the call's position (found only when needed)."""

    def __init__(self, call: exp.Expression, locator: Locator) -> None:
        self.call = call
        self.locator = locator

    def __call__(self, construct: str) -> str:
        name = function_name(self.call, self.locator)
        return self.locator.describe(construct.format(name=name), self.call)


def _registry_name(call: exp.Expression) -> str | None:
    if isinstance(call, exp.Anonymous):
        return ANONYMOUS_NAMES.get(call.name.lower())
    return REGISTRY_NAMES.get(type(call))


def _arguments(
    call: exp.Expression, named: _Named
) -> tuple[list[exp.Expression], bool, tuple[exp.Ordered, ...]]:
    """The call's arguments in order, whether DISTINCT, and its ORDER BY terms."""
    values: list[exp.Expression] = []
    if isinstance(call, exp.Anonymous):
        values = list(call.expressions)
    else:
        for key in call.arg_types:
            value = call.args.get(key)
            if key in IGNORED_ARGS or value is None or value is False or value == []:
                continue
            if isinstance(value, list):
                values.extend(value)
            elif isinstance(value, exp.Expression):
                values.append(value)
            else:
                raise UnsupportedSQL(f"{named('{name} with option ' + key)} is not supported")
    if values and isinstance(values[0], exp.Limit):
        raise UnsupportedSQL(f"{named('LIMIT inside {name}')} is not supported")
    order: tuple[exp.Ordered, ...] = ()
    distinct = False
    if values and isinstance(values[0], exp.Order):
        order = tuple(values[0].expressions)
        values = [v for v in (values[0].this, *values[1:]) if v is not None]
    if values and isinstance(values[0], exp.Distinct):
        distinct = True
        values = [*values[0].expressions, *values[1:]]
    return values, distinct, order


def _within_group(
    within: exp.Expression, func: str, arguments: list[exp.Expression], named: _Named
) -> list[exp.Expression]:
    """``f(constants) WITHIN GROUP (ORDER BY x)`` read as ``f(x, constants)``."""
    terms = within.expressions if isinstance(within, exp.Order) else []
    if func not in WITHIN_GROUP or len(terms) != 1:
        raise UnsupportedSQL(f"{named('{name} WITHIN GROUP')} is not supported")
    if terms[0].args.get("desc"):
        raise UnsupportedSQL(
            f"{named('{name} WITHIN GROUP (ORDER BY … DESC)')} is not supported: "
            "order ascending"
        )
    return [terms[0].this, *arguments]


def _check_against(
    function: AggregateFunction,
    arguments: list[exp.Expression],
    distinct: bool,
    order: tuple[exp.Ordered, ...],
    named: _Named,
) -> None:
    """UnsupportedSQL where the call does not fit the registry's ``function``."""
    if distinct and not function.distinct:
        raise UnsupportedSQL(f"{named('{name}(DISTINCT …)')} is not supported")
    if order and function.ordered == "refused":
        raise UnsupportedSQL(f"{named('ORDER BY inside {name}')} is not supported")
    if not order and function.ordered == "required":
        raise UnsupportedSQL(
            f"{named('{name} without ORDER BY')} is not supported: {ARBITRARY_ORDER}"
        )
    least = function.columns + function.constants[0]
    most = function.columns + function.constants[1]
    if not least <= len(arguments) <= most:
        takes = str(least) if least == most else f"{least} to {most}"
        counted = "{name} with " + f"{len(arguments)} argument(s)"
        raise UnsupportedSQL(f"{named(counted)} is not supported: it takes {takes}")
    if any(isinstance(a, exp.Star) for a in arguments):
        raise UnsupportedSQL(f"{named('{name}(*)')} is not supported")


def _is_literal(expression: exp.Expression) -> bool:
    """A literal, a negated literal, or an array of them."""
    if isinstance(expression, exp.Literal):
        return True
    if isinstance(expression, exp.Neg):
        return isinstance(expression.this, exp.Literal) and not expression.this.is_string
    if isinstance(expression, exp.Array):
        return all(_is_literal(e) for e in expression.expressions)
    return False


PICKS = (exp.First, exp.Last, exp.AnyValue)
"""Aggregates that pick one of a group's values (``FIRST``, ``LAST``, ``ANY_VALUE``)."""
PICK_NAMES = frozenset({"arbitrary"})
"""DuckDB's other names for them that sqlglot parses as anonymous functions."""


def is_pick(node: exp.Expression) -> bool:
    """True for a call of FIRST, LAST, ANY_VALUE or ARBITRARY (not over a window)."""
    picks = isinstance(node, PICKS) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in PICK_NAMES)
    return picks and not windowed(node)


def determined_picks(
    expression: exp.Expression, keys: list[exp.Expression] | None, locator: Locator
) -> exp.Expression:
    """``expression`` with each FIRST / LAST / ANY_VALUE call whose value is determined
    replaced by that value: a constant argument, or (``keys``: a plain GROUP BY's keys)
    an argument of GROUP BY key columns only, is the same for every row of a group,
    so the call is that argument (NULL over a group no row of passes its FILTER, or an
    empty global group). Any other is refused by name: DuckDB picks a row as it
    happens to scan them, which no maintenance can reproduce."""
    key_texts = {k.sql(dialect="duckdb") for k in keys or [] if isinstance(k, exp.Column)}
    holder = exp.Paren(this=expression.copy())
    for node in [n for n in in_scope(holder) if is_pick(n)]:
        outer, condition = node, None
        while isinstance(outer.parent, (exp.IgnoreNulls, exp.RespectNulls, exp.Filter)):
            outer = outer.parent
            if isinstance(outer, exp.Filter) and isinstance(outer.expression, exp.Where):
                condition = outer.expression.this
        argument = node.expressions[0] if isinstance(node, exp.Anonymous) else node.this
        if isinstance(argument, exp.Order):
            argument = argument.this
        columns = list(argument.find_all(exp.Column)) if argument is not None else []
        determined = argument is not None and argument.find(exp.Query) is None and (
            not columns or (keys is not None and all(
                c.sql(dialect="duckdb") in key_texts for c in columns)))
        if not determined:
            name = function_name(node, locator)
            raise UnsupportedSQL(
                f"{locator.describe(name, node)} is not supported here: it picks one of a "
                "group's values as DuckDB happens to scan them, which maintenance cannot "
                "reproduce; it is maintained where every candidate is equal (a constant, or "
                "an expression of the GROUP BY keys)"
            )
        count = exp.Count(this=exp.Star())
        if condition is not None:
            count = exp.Filter(this=count, expression=exp.Where(this=condition.copy()))
        value: exp.Expression = argument.copy()
        if condition is not None or not keys:
            nonempty = exp.GT(this=count, expression=exp.Literal.number(0))
            value = exp.Case().when(nonempty, value, copy=False)
        outer.replace(exp.Paren(this=value))
    return holder.this


def is_pick_call(node: exp.Expression) -> bool:
    """True for the outermost node of a FIRST / LAST / ANY_VALUE call (its FILTER or
    IGNORE NULLS wrapper included): checked by ``determined_picks``, not the registry."""
    while isinstance(node, (exp.Filter, exp.IgnoreNulls, exp.RespectNulls)):
        node = node.this
    return is_pick(node)
