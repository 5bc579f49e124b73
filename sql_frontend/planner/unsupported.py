"""Refuse, before planning, every construct the engine cannot maintain.

Each refusal is an ``UnsupportedSQL`` naming the construct and pointing at its
first character in the user's text (``SqlError`` where the SQL is wrong, not
merely unsupported: a nested aggregate).
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import UnsupportedSQL
from ivm.sql_frontend.planner.aggregate_calls import (
    check_not_nested,
    is_call,
    is_pick_call,
    take_apart,
)
from ivm.sql_frontend.planner.table_functions import (
    check_table_function,
    function_name,
    function_of,
)
from ivm.sql_frontend.planner.temporal_joins import is_temporal_join
from ivm.sql_frontend.planner.values import check_values
from ivm.sql_frontend.planner.windows import check_window
from ivm.sql_frontend.positions import Locator

UNSUPPORTED_NODES: dict[type[exp.Expression], str] = {
    exp.Pivot: "PIVOT",
    exp.TableSample: "USING SAMPLE / TABLESAMPLE (rows drawn at random)",
}
"""Constructs refused wherever they appear."""

VOLATILE: tuple[type[exp.Expression], ...] = (
    exp.Rand,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentTimestamp,
    exp.CurrentDatetime,
    exp.Uuid,
)
VOLATILE_NAMES = frozenset({"random", "now", "gen_random_uuid", "uuid", "setseed", "nextval"})
"""Functions whose value changes between calls (sqlglot classes, and names it does not know)."""


def reject_unsupported(tree: exp.Expression, locator: Locator) -> None:
    """Raise UnsupportedSQL for the first construct the engine cannot maintain."""
    for node in tree.walk():
        for kind, name in UNSUPPORTED_NODES.items():
            if isinstance(node, kind):
                raise UnsupportedSQL(f"{locator.describe(name, node)} is not supported")
        if isinstance(node, exp.With) and (node.args.get("search") or node.args.get("cycle")):
            search = node.args.get("search")
            kind = str(search.args.get("kind") or "SEARCH") if search is not None else "CYCLE"
            clause = "CYCLE" if kind.upper() == "CYCLE" else "SEARCH"
            raise UnsupportedSQL(f"{locator.describe(clause + ' clause', node)} is not supported")
        if isinstance(node, exp.Join):
            _check_join(node, locator)
        if isinstance(node, exp.Select):
            _check_using_chain(node, locator)
        if isinstance(node, exp.Table):
            _check_table(node, locator)
        if isinstance(node, exp.Unnest):
            check_table_function(node, locator)
        if isinstance(node, exp.Values):
            check_values(node, locator)
        if isinstance(node, exp.Window):
            check_window(node, locator)
        if isinstance(node, exp.Lateral) and not isinstance(node.this, exp.Subquery):
            ordinality = " WITH ORDINALITY" if node.args.get("ordinality") else ""
            what = f"LATERAL {function_name(node.this)}{ordinality}"
            raise UnsupportedSQL(f"{locator.describe(what, node)} is not supported: write "
                                 "the function without LATERAL")
        if is_call(node) and not is_pick_call(node):
            take_apart(node, locator)
            check_not_nested(node, locator)
        if isinstance(node, VOLATILE) or (
            isinstance(node, exp.Anonymous) and node.name.lower() in VOLATILE_NAMES
        ):
            raise UnsupportedSQL(
                f"{locator.describe('non-deterministic function', node)} is not supported: "
                "its value would differ between maintenance and recomputation"
            )


def _check_join(join: exp.Join, locator: Locator) -> None:
    method = (join.args.get("method") or "").upper()
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if method and method not in ("NATURAL", "ASOF"):
        raise UnsupportedSQL(f"{locator.describe(method + ' JOIN', join)} is not supported yet")
    if side not in ("", "LEFT", "RIGHT", "FULL"):
        raise UnsupportedSQL(f"{locator.describe(side + ' JOIN', join)} is not supported")
    if kind not in ("", "INNER", "CROSS", "OUTER", "SEMI", "ANTI") or (
        side and kind not in ("", "OUTER")
    ):
        construct = " ".join(w for w in (side, kind) if w) + " JOIN"
        raise UnsupportedSQL(f"{locator.describe(construct, join)} is not supported")


def _check_using_chain(select: exp.Select, locator: Locator) -> None:
    """USING or NATURAL after a RIGHT or FULL join: DuckDB matches on the COALESCE of the
    earlier sides' columns, which the name resolution does not reproduce."""
    padded_left = False
    for join in select.args.get("joins") or []:
        natural = (join.args.get("method") or "").upper() == "NATURAL"
        if padded_left and (join.args.get("using") or natural):
            construct = "NATURAL JOIN" if natural else "USING"
            raise UnsupportedSQL(
                f"{locator.describe(construct + ' after a RIGHT or FULL JOIN', join)} is not "
                "supported: write the join condition with ON"
            )
        padded_left = padded_left or (join.args.get("side") or "").upper() in ("RIGHT", "FULL")


def _check_table(table: exp.Table, locator: Locator) -> None:
    version = table.args.get("version")
    if version is not None and not is_temporal_join(table):
        raise UnsupportedSQL(
            f"{locator.describe('FOR SYSTEM_TIME AS OF', version)} is supported only as "
            "[LEFT] JOIN r FOR SYSTEM_TIME AS OF PROCTIME() (a processing-time temporal join)"
        )
    if not isinstance(table.this, exp.Identifier) and function_of(table) is None:
        raise UnsupportedSQL(f"{locator.describe('table function', table.this)} is not supported")
    check_table_function(table, locator)
