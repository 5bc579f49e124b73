"""GROUP BY as grouping sets: plain keys, GROUPING SETS, ROLLUP and CUBE, as DuckDB reads them.

Each element of a GROUP BY stands for a list of grouping sets: a plain expression
for one set holding it, ``ROLLUP(a, b)`` for (a, b), (a), (), ``CUBE(a, b)`` for
every subset, ``GROUPING SETS (…)`` for its members (a parenthesized list is one
set, ``()`` the empty set; ROLLUP and CUBE may nest there). Several elements
combine by cross product, duplicates kept (DuckDB keeps them: ``GROUP BY a,
ROLLUP(a, b)`` yields the set (a) twice, and so its rows twice).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from sqlglot import exp

from ivm.sql_frontend.planner.aggregate_calls import has_aggregate
from ivm.sql_frontend.planner.naming import rename_columns

GroupingSets = list[tuple[int, ...]]
"""Grouping sets as positions in the list of distinct key expressions."""

Outputs = list[tuple[str, exp.Expression]]
Index = Callable[[exp.Expression], int]


def plain_group(group: exp.Group | None) -> bool:
    """``group`` is absent or lists plain keys: no GROUPING SETS, ROLLUP, CUBE or ALL
    (sqlglot keeps ROLLUP and the like among the GROUP BY's expressions)."""
    if group is None:
        return True
    if any(group.args.get(a) for a in ("grouping_sets", "rollup", "cube", "all")):
        return False
    return not any(isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets))
                   for e in group.expressions)


def grouping_sets(
    group: exp.Group | None, outputs: Outputs, positions: dict[int, exp.Expression]
) -> tuple[list[exp.Expression], GroupingSets]:
    """The distinct GROUP BY expressions (renamed) and the grouping sets over them.

    A plain GROUP BY is one set holding every key; GROUP BY ALL groups by every SELECT
    expression without an aggregate, as DuckDB does. ``positions`` maps a GROUP BY
    ordinal inside ROLLUP/CUBE/GROUPING SETS (which sqlglot leaves) to its expression.
    """
    keys: dict[str, exp.Expression] = {}

    def index(expression: exp.Expression) -> int:
        if isinstance(expression, exp.Literal) and expression.is_int:
            expression = positions.get(int(expression.name), expression)
        renamed = rename_columns(expression)
        text = renamed.sql(dialect="duckdb")
        keys.setdefault(text, renamed)
        return list(keys).index(text)

    if group is not None and group.args.get("all"):
        elements: list[exp.Expression] = [e for _, e in outputs if not has_aggregate(e)]
    else:
        elements = list(group.expressions) if group is not None else []
    sets: GroupingSets = [()]
    for element in elements:
        sets = [a + b for a in sets for b in _sets_of(element, index)]
    return list(keys.values()), [tuple(dict.fromkeys(s)) for s in sets]


def _sets_of(element: exp.Expression, index: Index) -> GroupingSets:
    """The grouping sets one GROUP BY element stands for."""
    if isinstance(element, exp.Rollup):
        members = [_members(e, index) for e in element.expressions]
        return [sum(members[:n], ()) for n in range(len(members), -1, -1)]
    if isinstance(element, exp.Cube):
        members = [_members(e, index) for e in element.expressions]
        chosen = itertools.product((True, False), repeat=len(members))
        return [sum((m for m, c in zip(members, pick, strict=True) if c), ())
                for pick in chosen]
    if isinstance(element, exp.GroupingSets):
        return [s for e in element.expressions for s in _sets_of(e, index)]
    return [_members(element, index)]


def _members(element: exp.Expression, index: Index) -> tuple[int, ...]:
    """The keys of one set: a parenthesized list (``(a, b)``, ``()``) or one expression."""
    if isinstance(element, exp.Tuple):
        return tuple(index(e) for e in element.expressions)
    if isinstance(element, exp.Paren):
        return _members(element.this, index)
    return (index(element),)
