"""Named windows inlined: ``OVER w`` and ``OVER (w ORDER BY …)`` read ``WINDOW w AS (…)``.

An optimizer rule (``ivm.sql_frontend.rules``), run after ``qualify`` (which has
resolved the columns inside the ``WINDOW`` clause): every ``OVER`` that names a
window of its SELECT gets that window's PARTITION BY, ORDER BY and frame where it
gives none of its own, as DuckDB reads it (a definition may build on an earlier one:
``WINDOW a AS (PARTITION BY g), b AS (a ORDER BY x)``); the ``WINDOW`` clause is
then dropped. What DuckDB refuses (overriding a named ORDER BY, copying a frame)
it still refuses when it types the view's own SQL.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError

PARTS = ("partition_by", "order", "spec")
"""The parts of a window specification a named window lends."""


def inline_windows(expression: exp.Expression) -> exp.Expression:
    """``expression`` with every named-window reference replaced by its specification."""
    for select in list(expression.find_all(exp.Select)):
        named: dict[str, exp.Window] = {}
        for definition in select.args.get("windows") or []:
            named[definition.name.lower()] = _merged(definition, named)
        for window in _own_windows(select):
            if window.args.get("alias") is not None:
                window.replace(_merged(window, named))
        select.set("windows", None)
    return expression


def _merged(window: exp.Window, named: dict[str, exp.Window]) -> exp.Window:
    """``window`` with the parts it lacks taken from the window it names (if any)."""
    alias = window.args.get("alias")
    result = window.copy()
    result.set("alias", None)
    if alias is None:
        return result
    base = named.get(alias.name.lower())
    if base is None:
        raise OptimizeError(f"window '{alias.name}' is not defined")
    for part in PARTS:
        if not result.args.get(part) and base.args.get(part):
            result.set(part, base.args[part].copy() if part != "partition_by"
                       else [p.copy() for p in base.args[part]])
    return result


def _own_windows(select: exp.Select) -> list[exp.Window]:
    """The OVER clauses of ``select`` itself (not of the queries nested in it)."""
    found: list[exp.Window] = []
    stack: list[exp.Expression] = [e for e in select.iter_expressions()]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Query):
            continue
        if isinstance(node, exp.Window) and node.arg_key != "windows":
            found.append(node)
        stack.extend(node.iter_expressions())
    return found
