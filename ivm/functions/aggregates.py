"""The aggregate-function registry: every aggregate ivm maintains, declared once.

Each function is, for its argument types, of one of three classes (as Materialize
classifies its reductions), and the aggregate operators follow the class, never
the name:

* **invertible**: its value follows from a few running sums per group
  (*moments*, each ``SUM(term · weight)``), which a change updates by adding its
  own partial sums, deletes included. The operator keeps the moments per group
  and ``finalize`` turns them into the value. COUNT, SUM and AVG over exact
  numbers, VAR/STDDEV over narrow exact numbers, BOOL_AND/OR.
* **running** (``ivm.functions.running``): running state per group that a change
  updates from its own rows, except where a guard flags the group, which is then
  recomputed from its live rows. SUM/AVG over DOUBLE and REAL (NaN and ±inf
  counted apart, finite values summed exactly in fixed point and rounded once:
  1e17 + 1 − 1e17 is 1; flagged only while a value out of that range is live),
  MIN/MAX (flagged when every copy of the extreme leaves).
* **per key** otherwise: the value is recomputed, for each group the change
  touches, from the group's live rows (``ivm.operators.per_key``). Anything
  DISTINCT, VAR/STDDEV over floats or wide numbers, medians, quantiles, modes,
  ordered lists; and every call of an aggregate that has one such call.

A per-key call is rendered over the group's live rows either *weighted* (each
row once with its multiplicity ``__w``: MIN, SUM(x·w)…) or, for functions that
need every copy (MEDIAN, LIST…), over the rows expanded by their weights.

Where DuckDB leaves a result to chance, ivm is deterministic, and says so:
MODE picks the smallest of equally frequent values, ARG_MIN/ARG_MAX the
smallest argument among equal extremes, and ordered lists break ORDER BY ties
by the aggregated values themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ivm.functions import exact_sum, moment_values
from ivm.functions.moments import NON_NULL, Invertible, Moment
from ivm.functions.running import Running, extreme, float_sum
from ivm.storage.sqltext import W

SMALL_INTEGERS = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "UTINYINT", "USMALLINT", "UINTEGER"}
)
INTEGERS = SMALL_INTEGERS | {"BIGINT", "UBIGINT", "HUGEINT", "UHUGEINT"}
FLOATS = frozenset({"FLOAT", "REAL", "DOUBLE", "FLOAT4", "FLOAT8"})
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")

MAX_SQUARED_DECIMAL_DIGITS = 13
"""VAR/STDDEV keep exact sums of squares in HUGEINT (2^127) when every value, scaled to
an integer, is below 10^13 (≈ 2^43): then 2^40 rows per group cannot overflow."""


def decimal_scale(type_: str) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL type, None for any other type."""
    match = _DECIMAL.fullmatch(type_.upper().replace(" ", ""))
    return (int(match[1]), int(match[2])) if match else None


def is_exact_number(type_: str) -> bool:
    """Integers, DECIMAL and BOOLEAN: sums of them are exact (no rounding)."""
    spelled = type_.upper()
    return spelled in INTEGERS or spelled == "BOOLEAN" or decimal_scale(spelled) is not None


# -- invertible functions ----------------------------------------------------------------------


def _sum_of(type_: str) -> Moment:
    # Integer sums are HUGEINT in DuckDB; widen before weighting so n·x cannot overflow.
    if type_.upper() in INTEGERS or type_.upper() == "BOOLEAN":
        return Moment("s", "CAST({x} AS HUGEINT)")
    return Moment("s", "{x}")


def _count_star(_: str) -> Invertible:
    return Invertible((Moment("n", "1", "BIGINT"),), lambda m: m["n"], moment_values.count)


def _count(_: str) -> Invertible:
    return Invertible((NON_NULL,), lambda m: m["n"], moment_values.count)


def _sum(type_: str) -> Invertible | None:
    if not is_exact_number(type_):
        return None
    return Invertible(
        (NON_NULL, _sum_of(type_)),
        lambda m: f"CASE WHEN {m['n']} = 0 THEN NULL ELSE {m['s']} END",
        moment_values.exact_sum,
    )


def _avg(type_: str) -> Invertible | None:
    if not is_exact_number(type_):
        return None
    return Invertible(
        (NON_NULL, _sum_of(type_)),
        lambda m: f"CASE WHEN {m['n']} = 0 THEN NULL ELSE CAST({m['s']} AS DOUBLE) / {m['n']} END",
        moment_values.exact_average,
    )


def _bool(kind: str) -> Callable[[str], Invertible | None]:
    def invertible(type_: str) -> Invertible | None:
        if type_.upper() != "BOOLEAN":
            return None
        moments = (
            Moment("t", "CASE WHEN {x} THEN 1 ELSE 0 END", "BIGINT"),
            Moment("f", "CASE WHEN NOT {x} THEN 1 ELSE 0 END", "BIGINT"),
        )
        test = "{f} = 0" if kind == "and" else "{t} > 0"
        return Invertible(
            moments,
            lambda m: f"CASE WHEN {m['t']} + {m['f']} = 0 THEN NULL "
            f"ELSE {test.format(t=m['t'], f=m['f'])} END",
            moment_values.boolean(kind),
        )

    return invertible


HUGEINT_HEADROOM = 2**126
"""n·A below this fits HUGEINT (2^127) with room for the −r² that follows."""


def _variance(sample: bool, root: bool) -> Callable[[str], Invertible | None]:
    """VAR/STDDEV from n, Σx and Σx² kept exactly (x scaled to an integer).

    With s = q·n + r (integer division), n·Σx² − s² = n·A − r² where
    A = Σx² − q·(s + r) stays near the group's sum of squared deviations, so the
    numerator is computed exactly in HUGEINT (then one rounding to DOUBLE), with
    no cancellation however large the mean. Only for groups too large for
    HUGEINT does it fall back to DOUBLE, from the same exact A.
    """

    def invertible(type_: str) -> Invertible | None:
        spelled = type_.upper()
        if spelled in SMALL_INTEGERS:
            scale = 0
        else:
            decimal = decimal_scale(spelled)
            if decimal is None or decimal[0] > MAX_SQUARED_DECIMAL_DIGITS:
                return None
            scale = decimal[1]
        scaled = f"CAST(({{x}}) * {10**scale} AS HUGEINT)" if scale else "CAST({x} AS HUGEINT)"
        moments = (
            NON_NULL,
            Moment("s", scaled),
            Moment("ss", f"{scaled} * {scaled}"),
        )

        def finalize(m: Mapping[str, str]) -> str:
            n, s, ss = m["n"], m["s"], m["ss"]
            q = f"({s} // {n})"
            r = f"({s} - {q} * {n})"
            a = f"({ss} - {q} * ({s} + {r}))"
            exact = f"CAST({n} * {a} - {r} * {r} AS DOUBLE)"
            wide = f"(CAST({n} AS DOUBLE) * CAST({a} AS DOUBLE) - CAST({r} AS DOUBLE) ^ 2)"
            numerator = (
                f"GREATEST(CASE WHEN abs({a}) <= CAST({HUGEINT_HEADROOM} AS HUGEINT) // {n} "
                f"THEN {exact} ELSE {wide} END, 0)"
            )
            if sample:
                denominator = f"(CAST({n} AS DOUBLE) * ({n} - 1))"
            else:
                denominator = f"(CAST({n} AS DOUBLE) ^ 2)"
            value = f"{numerator} / {denominator}"
            if scale:
                value = f"({value}) / {10 ** (2 * scale)}.0"
            if root:
                value = f"sqrt({value})"
            least = 2 if sample else 1
            return f"CASE WHEN {n} < {least} THEN NULL ELSE {value} END"

        return Invertible(moments, finalize)

    return invertible


# -- running functions (ivm.functions.running) -------------------------------------------------

ORDERED_SCALARS = INTEGERS | FLOATS | {
    "BOOLEAN", "VARCHAR", "BLOB", "UUID", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S",
    "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE",
}
"""Types whose equal values are identical, so a kept MIN/MAX is the value DuckDB shows:
not INTERVAL ('1 month' = '30 days'), TIME WITH TIME ZONE or nested types."""


def _float_sum(average: bool) -> Callable[[str], Running | None]:
    def running(type_: str) -> Running | None:
        spelled = type_.upper()
        if spelled not in FLOATS:
            return None
        return float_sum(average, widen=spelled not in ("DOUBLE", "FLOAT8"))

    return running


def _exact_float_sum(average: bool) -> Callable[[str, str | None, str], str]:
    """SUM (or AVG) of a DOUBLE argument over rows, as the exact sum rounded once (the
    value a running float sum gives: ``ivm.functions.exact_sum``)."""

    def sql(x: str, weight: str | None, condition: str) -> str:
        total = exact_sum.total(x, weight, condition)
        if not average:
            return total
        copies = f"SUM(CASE WHEN {x} IS NULL THEN NULL ELSE {weight} END)" if weight else (
            f"COUNT({x})")
        return f"({total}) / {copies}{condition}"

    return sql


def _extreme(largest: bool) -> Callable[[str], Running | None]:
    def running(type_: str) -> Running | None:
        spelled = type_.upper()
        if spelled in ORDERED_SCALARS or decimal_scale(spelled) is not None:
            return extreme(largest)
        return None

    return running


# -- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AggregateFunction:
    """One aggregate function as ivm knows it.

    ``columns``: how many arguments are columns (evaluated per row), in order;
    ``constants``: how many constant arguments may follow them (a separator, a
    fraction); ``ordered``: whether ``ORDER BY`` inside the call is refused,
    optional or required (an unordered list's order would differ between
    maintenance and recomputation); ``weighted``: SQL of the function over live
    rows each standing for ``__w`` copies (``{x}``/``{y}`` the argument columns,
    ``{w}`` the weight, ``{filter}`` where a FILTER clause goes), or None when it
    needs the rows expanded into copies; ``plain``: its SQL over ordinary rows when
    that is not ``NAME(args…)`` (``{x}``/``{y}`` the arguments, ``{distinct}``,
    ``{filter}`` where its FILTER clause goes);
    ``skips_nulls``: rows with a NULL argument do not take part; ``weighs_values``: the
    weighted form multiplies values by weights, so it serves numbers only;
    ``invertible`` / ``running``: per argument type, its invertible or running form
    (None: none for that type); ``exact_floats``: its SQL over rows of a float argument
    where DuckDB's own answer depends on the order of the rows and ivm's does not
    (``exact_float_sql``): the argument as DOUBLE, the weight (None: one copy per row)
    and the FILTER clause.
    """

    name: str
    columns: int = 1
    constants: tuple[int, int] = (0, 0)
    ordered: str = "refused"  # "refused", "optional" or "required"
    distinct: bool = True
    weighted: str | None = None
    invertible: Callable[[str], Invertible | None] = field(default=lambda _: None)
    plain: str | None = None
    skips_nulls: bool = False
    weighs_values: bool = False
    running: Callable[[str], Running | None] = field(default=lambda _: None)
    exact_floats: Callable[[str, str | None, str], str] | None = None

    def invertible_for(self, types: Sequence[str], distinct: bool) -> Invertible | None:
        """The invertible form for arguments of ``types``; None means per key."""
        if distinct:
            return None
        return self.invertible(types[0] if types else "")

    def running_for(self, types: Sequence[str], distinct: bool) -> Running | None:
        """The running form for arguments of ``types``; None when it has none."""
        if distinct:
            return None
        return self.running(types[0] if types else "")


MODE_SQL = (
    "list_min(list_transform(map_entries(histogram({distinct}{x}){filter}), "
    "lambda __e: struct_pack(c := -CAST(__e.value AS BIGINT), k := __e.key))).k"
)
"""MODE, deterministic: the most frequent value, and among equally frequent ones the smallest."""

_FUNCTIONS = (
    AggregateFunction("count_star", columns=0, distinct=False, plain="COUNT(*){filter}",
                      weighted="COALESCE(SUM({w}){filter}, 0)", invertible=_count_star),
    AggregateFunction(
        "count",
        weighted="COALESCE(SUM(CASE WHEN {x} IS NULL THEN 0 ELSE {w} END){filter}, 0)",
        invertible=_count,
    ),
    AggregateFunction("sum", weighted="SUM({x} * CAST({w} AS HUGEINT)){filter}",
                      weighs_values=True, invertible=_sum, running=_float_sum(False),
                      exact_floats=_exact_float_sum(False)),
    AggregateFunction(
        "avg",
        weighted="SUM({x} * CAST({w} AS HUGEINT)){filter} "
        "/ SUM(CASE WHEN {x} IS NULL THEN NULL ELSE {w} END){filter}",
        weighs_values=True,
        invertible=_avg,
        running=_float_sum(True),
        exact_floats=_exact_float_sum(True),
    ),
    AggregateFunction("min", weighted="MIN({x}){filter}", running=_extreme(False)),
    AggregateFunction("max", weighted="MAX({x}){filter}", running=_extreme(True)),
    AggregateFunction("bool_and", weighted="BOOL_AND({x}){filter}", invertible=_bool("and")),
    AggregateFunction("bool_or", weighted="BOOL_OR({x}){filter}", invertible=_bool("or")),
    AggregateFunction("var_samp", invertible=_variance(sample=True, root=False)),
    AggregateFunction("var_pop", invertible=_variance(sample=False, root=False)),
    AggregateFunction("stddev_samp", invertible=_variance(sample=True, root=True)),
    AggregateFunction("stddev_pop", invertible=_variance(sample=False, root=True)),
    AggregateFunction("median"),
    AggregateFunction("quantile_cont", constants=(1, 1)),
    AggregateFunction("quantile_disc", constants=(1, 1)),
    AggregateFunction("mode", plain=MODE_SQL),
    # deterministic: among the rows holding the extreme, the smallest argument
    AggregateFunction("arg_min", columns=2, distinct=False, skips_nulls=True,
                      plain="first({x} ORDER BY {y}, {x}){filter}"),
    AggregateFunction("arg_max", columns=2, distinct=False, skips_nulls=True,
                      plain="first({x} ORDER BY {y} DESC, {x}){filter}"),
    AggregateFunction("string_agg", constants=(0, 1), ordered="required"),
    AggregateFunction("list", ordered="required"),
)

FUNCTIONS: Mapping[str, AggregateFunction] = {f.name: f for f in _FUNCTIONS}
"""Every aggregate function ivm maintains, by name."""


def lookup(name: str) -> AggregateFunction:
    """The function called ``name`` (KeyError when ivm does not maintain it)."""
    return FUNCTIONS[name]


def weighted_sql(
    function: AggregateFunction,
    args: Sequence[str],
    types: Sequence[str],
    condition: str | None = None,
) -> str | None:
    """``function`` over live weighted rows, arguments (of ``types``) and FILTER condition
    given as SQL; None when it needs the rows expanded into copies."""
    if function.weighted is None:
        return None
    where = f" FILTER (WHERE {condition})" if condition else ""
    exact = exact_float_sql(function, args, types, where, weight=W)
    if exact is not None:
        return exact
    if function.weighs_values:  # value × weight: numbers only, summed as DuckDB sums them
        spelled = types[0].upper()
        if spelled in FLOATS:
            args = [f"CAST({args[0]} AS DOUBLE)"]
        elif spelled == "BOOLEAN":
            args = [f"CAST({args[0]} AS INTEGER)"]
        elif not (spelled == "DOUBLE" or is_exact_number(spelled)):
            return None
    names = dict(zip("xy", args, strict=False))
    return function.weighted.format(w=W, filter=where, **names)


def exact_float_sql(
    function: AggregateFunction,
    args: Sequence[str],
    types: Sequence[str],
    where: str = "",
    weight: str | None = None,
) -> str | None:
    """``function`` over rows (each standing for ``weight`` copies, if given) where its
    argument is a float and DuckDB's answer would depend on the rows' order: SUM/AVG, the
    exact sum rounded once, as a running float sum keeps it. ``where``: the FILTER clause.
    None for any other function or type (and for DISTINCT calls, which the caller leaves
    as DuckDB computes them)."""
    if function.exact_floats is None or not types or types[0].upper() not in FLOATS:
        return None
    return function.exact_floats(f"CAST({args[0]} AS DOUBLE)", weight, where)


__all__ = [
    "FUNCTIONS",
    "NON_NULL",
    "AggregateFunction",
    "Invertible",
    "Moment",
    "Running",
    "decimal_scale",
    "exact_float_sql",
    "is_exact_number",
    "lookup",
    "weighted_sql",
]
