"""Table functions in FROM: UNNEST, ``generate_series``, ``range`` and a few constant ones.

A table function computes rows from its arguments alone. With constant arguments it is a
constant relation; with arguments reading columns of the FROM items before it (``FROM t,
unnest(t.tags) AS u(tag)``) it is a flat map of those items' rows (``ivm.operators.
flat_map``). Either way DuckDB evaluates it, so its semantics are DuckDB's (an empty or
NULL list gives no rows, WITH ORDINALITY counts from 1).

sqlglot does not know the columns a table function produces, so ``name_table_functions``
writes DuckDB's names into each one's alias before names are resolved (``unnest(l)`` is
``unnest(l) AS unnest(unnest)``; an alias without columns names the one column, as
DuckDB does; WITH ORDINALITY adds ``ordinality``); a function with constant arguments is
asked of DuckDB. Functions that read files or the catalog are refused by name.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.errors import UnsupportedSQL
from ivm.sql_frontend.planner.context import Describe
from ivm.sql_frontend.positions import Locator

ROW_FUNCTIONS = frozenset({"unnest", "generate_series", "range"})
"""Table functions whose arguments may read the columns of earlier FROM items."""
CONSTANT_FUNCTIONS = frozenset({"repeat", "repeat_row"})
"""Table functions maintained with constant arguments only (DuckDB allows no others)."""
EXTERNAL_PREFIXES = ("read_", "parquet_", "duckdb_", "pragma_", "sniff_", "json_execute")
EXTERNAL_FUNCTIONS = frozenset({"glob", "query", "query_table", "seq_scan", "which_secret",
                                "arrow_scan", "pandas_scan", "summary", "checkpoint"})
"""Table functions reading files, the catalog or other state outside the view's tables."""

ORDINALITY = "ordinality"


def function_of(item: exp.Expression) -> exp.Expression | None:
    """The table function a FROM item calls (the Unnest itself for UNNEST), or None."""
    if isinstance(item, exp.Unnest):
        return item
    if isinstance(item, exp.Table) and isinstance(item.this, exp.Func):
        return item.this
    return None


def function_name(function: exp.Expression) -> str:
    """The table function's name as the user spells it, lower case."""
    if isinstance(function, exp.Unnest):
        return "unnest"
    if isinstance(function, exp.GenerateSeries):
        return "range" if function.args.get("is_end_exclusive") else "generate_series"
    if isinstance(function, exp.Anonymous):
        return function.name.lower()
    return function.sql(dialect="duckdb").split("(", 1)[0].strip().lower()


def reads_columns(function: exp.Expression) -> bool:
    """Whether the function's arguments read columns (of earlier FROM items)."""
    return function.find(exp.Column) is not None


def check_table_function(item: exp.Expression, locator: Locator) -> None:
    """UnsupportedSQL for a table function ivm cannot maintain: one reading files or other
    state outside the view's tables, one it does not know, or one of the constant-only
    functions reading columns."""
    function = function_of(item)
    if function is None:
        return
    name = function_name(function)
    construct = locator.describe(f"table function {name}", function)
    if name in EXTERNAL_FUNCTIONS or name.startswith(EXTERNAL_PREFIXES):
        raise UnsupportedSQL(
            f"{construct} is not supported: it reads files or state outside the view's "
            "tables, whose changes ivm does not see"
        )
    if name in CONSTANT_FUNCTIONS and reads_columns(function):
        raise UnsupportedSQL(f"{construct} is supported with constant arguments only")
    if name not in ROW_FUNCTIONS | CONSTANT_FUNCTIONS:
        known = ", ".join(sorted(ROW_FUNCTIONS | CONSTANT_FUNCTIONS))
        raise UnsupportedSQL(f"{construct} is not supported (supported: {known})")


def _is_from_item(node: exp.Expression) -> bool:
    return isinstance(node.parent, (exp.From, exp.Join))


def name_table_functions(tree: exp.Expression, describe: Describe) -> exp.Expression:
    """``tree`` (copied) with every table function in FROM aliased with DuckDB's names for
    its table and columns."""
    tree = tree.copy()
    for item in list(tree.find_all(exp.Unnest, exp.Table)):
        function = function_of(item)
        if function is None or not _is_from_item(item):
            continue
        name = function_name(function)
        if reads_columns(function):
            names = _row_function_names(item, name)
        else:
            names = list(describe(f"SELECT * FROM {item.sql(dialect='duckdb')}").names)
        _set_names(item, name, names)
    return tree


def _ordinality(item: exp.Expression) -> bool:
    if isinstance(item, exp.Unnest):
        return bool(item.args.get("offset"))
    return bool(item.args.get("ordinality"))


def _row_function_names(item: exp.Expression, name: str) -> list[str]:
    """DuckDB's column names of a one-column table function (UNNEST, generate_series,
    range): the alias's columns; else the alias itself without WITH ORDINALITY, the
    function's name with it; then ``ordinality``."""
    alias = item.args.get("alias")
    given = [c.name for c in alias.columns] if alias is not None else []
    offset = item.args.get("offset") if isinstance(item, exp.Unnest) else None
    if isinstance(offset, exp.Identifier):
        given.append(offset.name)
    ordinal = _ordinality(item)
    if given:
        value = given[0]
    elif alias is not None and alias.name and not ordinal:
        value = alias.name
    else:
        value = name
    names = [value]
    if ordinal:
        names.append(given[1] if len(given) > 1 else ORDINALITY)
    return names


def _set_names(item: exp.Expression, name: str, names: list[str]) -> None:
    """Alias ``item`` as its table name (the alias, else the function's name) with
    ``names`` as its columns (UNNEST keeps its ordinality column apart, as sqlglot
    reads it)."""
    alias = item.args.get("alias")
    table = alias.name if alias is not None and alias.name else name
    columns = names
    if isinstance(item, exp.Unnest) and _ordinality(item):
        columns = names[:-1]
        item.set("offset", exp.to_identifier(names[-1]))
    item.set("alias", exp.TableAlias(
        this=exp.to_identifier(table), columns=[exp.to_identifier(n) for n in columns]))
