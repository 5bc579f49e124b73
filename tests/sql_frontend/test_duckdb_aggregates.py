"""sql_frontend.duckdb_aggregates: the static list of DuckDB's aggregate names is DuckDB's
own, and the front end recognizes every one of them as an aggregate (refusing the ones
ivm does not maintain, naming them)."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot
from sqlglot.errors import ParseError

from ivm.errors import UnsupportedSQL
from ivm.sql_frontend.duckdb_aggregates import DUCKDB_AGGREGATES
from ivm.sql_frontend.planner.aggregate_calls import (
    ANONYMOUS_NAMES,
    REGISTRY_NAMES,
    is_aggregate,
)

MAINTAINED_SPELLINGS = frozenset({
    "count", "sum", "avg", "mean", "min", "max", "stddev", "stddev_samp", "stddev_pop",
    "variance", "var_samp", "var_pop", "bool_and", "bool_or", "string_agg", "listagg",
    "group_concat", "list", "array_agg", "median", "quantile_cont", "quantile_disc",
    "quantile", "arg_min", "argmin", "min_by", "arg_max", "argmax", "max_by", "mode",
})
"""DuckDB aggregate names ivm maintains (with the right arguments)."""


def test_the_list_is_duckdbs_own():
    rows = duckdb.connect().execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type = 'aggregate'"
    ).fetchall()
    assert {r[0] for r in rows} == set(DUCKDB_AGGREGATES)


def parsed_call(name: str):
    """``name`` called with as few column arguments as sqlglot accepts."""
    for args in ("x", "x, y", "x, y, z", ""):
        try:
            return sqlglot.parse_one(f"SELECT {name}({args}) FROM m", read="duckdb").expressions[0]
        except ParseError:
            continue
    raise AssertionError(f"sqlglot parses no call of {name}")


@pytest.mark.parametrize("name", sorted(DUCKDB_AGGREGATES))
def test_every_duckdb_aggregate_is_recognized(name):
    call = parsed_call(name)
    assert any(is_aggregate(n) for n in call.walk()), name


@pytest.mark.parametrize("name", sorted(DUCKDB_AGGREGATES - MAINTAINED_SPELLINGS))
def test_unmaintained_aggregates_are_refused_by_name(plan, name):
    call = parsed_call(name).sql(dialect="duckdb")
    # FIRST / LAST / ANY_VALUE / ARBITRARY are maintained where determined, refused
    # elsewhere by a message of their own (tests/test_pick_aggregates.py)
    kind = "" if name in ("any_value", "arbitrary", "first", "last") else "aggregate function "
    with pytest.raises(UnsupportedSQL, match=f"{kind}{name.upper()} "):
        plan(f"SELECT k, {name}{call[call.index('('):]} AS v FROM m GROUP BY k")


def test_every_maintained_spelling_maps_to_a_registry_function():
    mapped = {type(parsed_call(n)) for n in MAINTAINED_SPELLINGS - set(ANONYMOUS_NAMES)}
    assert mapped <= set(REGISTRY_NAMES)
