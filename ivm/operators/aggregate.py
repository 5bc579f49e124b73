"""GROUP BY: the Aggregate plan node and the choice of its incremental form.

Meaning: for each group g of the input (rows with positive net weight), one
output row (g, f₁(g), …) with weight 1. A global aggregate (no keys) has exactly
one output row, even over an empty input (COUNT 0, other aggregates NULL).

Each call's function is looked up in the registry (``ivm.functions.aggregates``)
for its argument types. When every call is invertible the aggregate keeps group
versions (``ivm.operators.invertible_aggregate``); otherwise every call is
recomputed for the touched groups from their live rows
(``ivm.operators.group_recompute``, a user of the per-key operator). The choice
is made in ``ivm.operators.registry``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.functions.aggregates import (
    AggregateFunction,
    Invertible,
    exact_float_sql,
    lookup,
)
from ivm.plan.node import Plan
from ivm.plan.sql import column_list, sql_of
from ivm.schema import quote


@dataclass(frozen=True)
class SortKey:
    """One ORDER BY term inside an aggregate call, on an input column."""

    column: str
    descending: bool = False
    nulls_first: bool = False

    def sql(self) -> str:
        """The term as DuckDB SQL."""
        direction = " DESC" if self.descending else ""
        nulls = " NULLS FIRST" if self.nulls_first else " NULLS LAST"
        return f"{quote(self.column)}{direction}{nulls}"


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate call over input columns, named ``name`` in the output.

    ``func`` names a registry function (``count_star`` for COUNT(*)); ``args`` are
    the input columns it reads, in argument order; ``constants`` the constant
    arguments after them (a separator, a fraction); ``filter`` the input column
    holding its ``FILTER (WHERE …)`` condition (NULL counts as false); ``order``
    its ``ORDER BY``.
    """

    name: str
    func: str
    args: tuple[str, ...] = ()
    constants: tuple[exp.Expression, ...] = ()
    distinct: bool = False
    filter: str | None = None
    order: tuple[SortKey, ...] = ()

    @property
    def function(self) -> AggregateFunction:
        """The registry entry of ``func``."""
        return lookup(self.func)

    @property
    def arg(self) -> str | None:
        """The first argument column (None for COUNT(*))."""
        return self.args[0] if self.args else None

    def sql(self, types: Sequence[str] = ()) -> str:
        """The call as DuckDB SQL over the input's columns (what ivm maintains), the
        arguments of ``types`` (where known).

        Where DuckDB leaves a result to chance, this is ivm's deterministic
        version: MODE takes the smallest of the most frequent values, ARG_MIN/
        ARG_MAX the smallest argument among equal extremes, ordered lists break
        ties by the aggregated values, SUM/AVG over floats is the exact sum rounded
        once (``exact_float_sql``; DuckDB's varies with the order of the rows).
        """
        args = [quote(a) for a in self.args]
        function = self.function
        conditions = [quote(self.filter)] if self.filter else []
        if function.skips_nulls:
            conditions += [f"{a} IS NOT NULL" for a in args]
        distinct = "DISTINCT " if self.distinct else ""
        where = f" FILTER (WHERE {' AND '.join(conditions)})" if conditions else ""
        exact = None if self.distinct else exact_float_sql(function, args, types, where)
        if exact is not None:
            return exact
        if function.plain is not None:
            names = dict(zip("xy", args, strict=False))
            return function.plain.format(distinct=distinct, filter=where, **names)
        inner = ", ".join([*args, *(sql_of(c) for c in self.constants)])
        order = [k.sql() for k in self.order]
        if self.order:  # ties broken by the values themselves: deterministic
            order += [f"{a} NULLS LAST" for a in args]
        ordered = f" ORDER BY {', '.join(order)}" if order else ""
        return f"{self.func.upper()}({distinct}{inner}{ordered}){where}"

    def describe(self) -> str:
        """The call for explain."""
        return f"{self.name} := {self.sql()}"


@dataclass(frozen=True, eq=False)
class Aggregate(Plan):
    """GROUP BY ``keys`` (input column names) computing ``calls``.

    With no keys this is a global aggregate: exactly one output row, even over an
    empty input. Output columns: the keys, then one column per call.
    """

    input: Plan
    keys: tuple[str, ...]
    calls: tuple[AggregateCall, ...]

    def plain(self, inputs: Sequence[str]) -> str:
        values = [c.sql(self.types(c)) for c in self.calls]
        return grouped_sql(inputs[0], self.keys, values, self.calls)

    def types(self, call: AggregateCall) -> list[str]:
        """The types of ``call``'s arguments."""
        return [self.input.schema.type_of(a) for a in call.args]

    def describe(self) -> str:
        return f"Aggregate {self.grouping()} " + ", ".join(c.describe() for c in self.calls)

    @property
    def partition_key(self) -> tuple[str, ...]:
        """The input columns its rows are partitioned by (Spark mode): its group keys."""
        return self.keys

    def grouping(self) -> str:
        """How its rows are grouped, for explain: ``by [keys]`` (``(global)`` without)."""
        return f"by [{', '.join(self.keys) or '(global)'}]"

    def invertible_forms(self) -> list[Invertible] | None:
        """Each call's invertible form for its argument types; None if any call has none."""
        forms = []
        for call in self.calls:
            types = [self.input.schema.type_of(a) for a in call.args]
            form = call.function.invertible_for(types, call.distinct)
            if form is None:
                return None
            forms.append(form)
        return forms


@dataclass(frozen=True, eq=False)
class LocalAggregate(Aggregate):
    """A global aggregate computed in each partition over that partition's rows only.

    Partitioned execution hashes its input by ``partition_by`` (the whole row, or the
    argument of its DISTINCT calls, so each value lives in one partition); each
    partition then holds one output row, the partials of its own rows, and a global
    aggregate over those partials merges them (``ivm.passes.split_global_aggregates``).
    Run in one place it is the plain global aggregate.
    """

    partition_by: tuple[str, ...] = ()

    @property
    def partition_key(self) -> tuple[str, ...]:
        return self.partition_by

    def grouping(self) -> str:
        return f"in each partition (rows by [{', '.join(self.partition_by)}])"


def grouped_sql(
    source: str, keys: Sequence[str], values: Sequence[str], calls: Sequence[AggregateCall]
) -> str:
    """``SELECT keys, value AS call.name … FROM source GROUP BY keys`` (global without keys)."""
    parts = [quote(k) for k in keys]
    parts += [f"{v} AS {quote(c.name)}" for v, c in zip(values, calls, strict=True)]
    group = f" GROUP BY {column_list(keys)}" if keys else ""
    return f"SELECT {', '.join(parts)} FROM ({source}) AS __in{group}"
