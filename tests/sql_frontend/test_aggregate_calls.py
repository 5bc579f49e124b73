"""sql_frontend.planner.aggregate_calls and grouping: every aggregate the registry maintains
becomes one AggregateCall over the pre-aggregation projection's columns; what ivm does not
maintain is refused naming the function and where it is.

Table ``m`` (conftest): k INTEGER, x INTEGER, y DOUBLE, d DECIMAL(10,2), s VARCHAR,
b BOOLEAN, c BOOLEAN.
"""

from __future__ import annotations

from collections import Counter

import pytest
import sqlglot
from sqlglot import exp

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.aggregate import Aggregate, AggregateCall, SortKey
from ivm.operators.project import Project
from ivm.plan.node import Plan, plain_sql
from ivm.sql_frontend.planner.aggregate_calls import take_apart
from ivm.sql_frontend.positions import Locator


def aggregate_of(root: Plan) -> Aggregate:
    (aggregate,) = [n for n in root.walk() if isinstance(n, Aggregate)]
    return aggregate


def inputs(aggregate: Aggregate) -> dict[str, str]:
    """The pre-aggregation projection: column name -> its SQL."""
    assert isinstance(aggregate.input, Project)
    return {name: e.sql(dialect="duckdb") for name, e in aggregate.input.exprs}


def only_call(plan, select_list: str) -> tuple[AggregateCall, dict[str, str]]:
    aggregate = aggregate_of(plan(f"SELECT k, {select_list} AS v FROM m GROUP BY k"))
    (call,) = aggregate.calls
    return call, inputs(aggregate)


@pytest.mark.parametrize(
    ("select_list", "func", "args", "constants"),
    [
        ("COUNT(*)", "count_star", [], []),
        ("COUNT(x)", "count", ["m.x"], []),
        ("SUM(x)", "sum", ["m.x"], []),
        ("AVG(d)", "avg", ["m.d"], []),
        ("MEAN(d)", "avg", ["m.d"], []),
        ("MIN(s)", "min", ["m.s"], []),
        ("MAX(y)", "max", ["m.y"], []),
        ("STDDEV(x)", "stddev_samp", ["m.x"], []),
        ("STDDEV_SAMP(x)", "stddev_samp", ["m.x"], []),
        ("STDDEV_POP(x)", "stddev_pop", ["m.x"], []),
        ("VARIANCE(d)", "var_samp", ["m.d"], []),
        ("VAR_SAMP(d)", "var_samp", ["m.d"], []),
        ("VAR_POP(y)", "var_pop", ["m.y"], []),
        ("BOOL_AND(b)", "bool_and", ["m.b"], []),
        ("BOOL_OR(b)", "bool_or", ["m.b"], []),
        ("MEDIAN(y)", "median", ["m.y"], []),
        ("QUANTILE_CONT(x, 0.25)", "quantile_cont", ["m.x"], ["0.25"]),
        ("QUANTILE_CONT(x, [0.25, 0.5])", "quantile_cont", ["m.x"], ["[0.25, 0.5]"]),
        ("QUANTILE_DISC(d, 0.5)", "quantile_disc", ["m.d"], ["0.5"]),
        ("QUANTILE(d, 0.5)", "quantile_disc", ["m.d"], ["0.5"]),
        ("PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY y)", "quantile_cont", ["m.y"], ["0.5"]),
        ("MODE(s)", "mode", ["m.s"], []),
        ("ARG_MIN(s, x)", "arg_min", ["m.s", "m.x"], []),
        ("MIN_BY(s, x)", "arg_min", ["m.s", "m.x"], []),
        ("ARG_MAX(s, y)", "arg_max", ["m.s", "m.y"], []),
        ("MAX_BY(s, y)", "arg_max", ["m.s", "m.y"], []),
        ("STRING_AGG(s, '|' ORDER BY s)", "string_agg", ["m.s"], ["'|'"]),
        ("STRING_AGG(s ORDER BY s)", "string_agg", ["m.s"], []),
        ("LISTAGG(s, ',' ORDER BY x)", "string_agg", ["m.s"], ["','"]),
        ("GROUP_CONCAT(s, ',' ORDER BY x)", "string_agg", ["m.s"], ["','"]),
        ("LIST(x ORDER BY x)", "list", ["m.x"], []),
        ("ARRAY_AGG(x ORDER BY y)", "list", ["m.x"], []),
    ],
)
def test_each_function_becomes_one_call(plan, select_list, func, args, constants):
    call, columns = only_call(plan, select_list)
    assert call.func == func
    assert [columns[a] for a in call.args] == [f'"{a}"' for a in args]
    assert [c.sql(dialect="duckdb") for c in call.constants] == constants
    assert not call.distinct
    assert call.filter is None


def test_distinct_is_kept_where_the_function_allows_it(plan):
    aggregate = aggregate_of(plan(
        "SELECT k, COUNT(DISTINCT x) AS a, SUM(DISTINCT x) AS b, "
        "STRING_AGG(DISTINCT s, ',' ORDER BY s) AS c, SUM(x) AS e FROM m GROUP BY k"
    ))
    by_func = {(c.func, c.distinct): c for c in aggregate.calls}
    assert set(by_func) == {("count", True), ("sum", True), ("string_agg", True), ("sum", False)}
    # the same argument is one column of the pre-aggregation projection
    assert by_func["count", True].args == by_func["sum", True].args == by_func["sum", False].args


def test_filter_conditions_become_f_columns_shared_by_text(plan):
    aggregate = aggregate_of(plan(
        "SELECT k, SUM(x) FILTER (WHERE c) AS a, COUNT(*) FILTER (WHERE c) AS n, "
        "MAX(y) FILTER (WHERE x > 1) AS t, SUM(x) AS u FROM m GROUP BY k"
    ))
    columns = inputs(aggregate)
    calls = {c.name: c for c in aggregate.calls}
    assert len(calls) == 4  # SUM(x) with and without FILTER are different calls
    filters = [c.filter for c in aggregate.calls]
    assert filters.count(None) == 1
    named = [f for f in filters if f is not None]
    assert all(f.startswith("__f") for f in named)
    assert len(set(named)) == 2  # WHERE c twice is one column
    assert sorted(columns[f] for f in set(named)) == ['"m.c"', '"m.x" > 1']
    assert {c.func for c in aggregate.calls if c.filter} == {"sum", "count_star", "max"}


def test_order_by_inside_a_call_becomes_sort_keys(plan):
    call, columns = only_call(plan, "LIST(x ORDER BY y DESC NULLS FIRST, s)")
    assert call.func == "list"
    assert [columns[k.column] for k in call.order] == ['"m.y"', '"m.s"']
    assert call.order[0] == SortKey(call.order[0].column, descending=True, nulls_first=True)
    assert call.order[1] == SortKey(call.order[1].column, descending=False, nulls_first=False)
    # ORDER BY the argument itself reads the argument's column
    call, _ = only_call(plan, "STRING_AGG(s, ',' ORDER BY s DESC)")
    assert call.order[0].column == call.args[0]
    assert call.order[0].descending


def test_arguments_are_columns_named_a_and_shared(plan):
    aggregate = aggregate_of(plan(
        "SELECT k, SUM(x + 1) AS a, MAX(x + 1) AS b, MIN(x) AS c FROM m GROUP BY k"
    ))
    columns = inputs(aggregate)
    sums = {c.func: c.args[0] for c in aggregate.calls}
    assert sums["sum"] == sums["max"] != sums["min"]
    assert all(a.startswith("__a") for a in sums.values())
    assert columns[sums["sum"]] == '"m.x" + 1'
    assert [k for k in columns if k.startswith("__k")] == ["__k0"]


def test_what_works_keeps_working(con, plan):
    for sql in [
        "SELECT k, SUM(x) AS s FROM m GROUP BY ALL",
        "SELECT k AS key, SUM(x) * 2 + COUNT(*) AS e FROM m GROUP BY key HAVING COUNT(*) > 1",
        "SELECT COUNT(*) AS n FROM m",
        "SELECT k % 2 AS p, MAX(s) AS top FROM m GROUP BY 1",
        "SELECT k, SUM(x) FILTER (WHERE b) AS f FROM m GROUP BY k "
        "HAVING SUM(x) FILTER (WHERE c) > 0",
    ]:
        root = plan(sql)
        assert Counter(con.execute(plain_sql(root)).fetchall()) == Counter(
            con.execute(sql).fetchall()
        ), sql
    (only,) = aggregate_of(plan("SELECT COUNT(*) AS n FROM m")).input.exprs
    assert only[0] == "__one"


REFUSED = [
    ("PRODUCT(x)", "aggregate function PRODUCT", "PRODUCT(x)"),
    ("any_value(x)", "ANY_VALUE (at", "any_value(x)"),
    ("first(x)", "FIRST (at", "first(x)"),
    ("histogram(x)", "aggregate function HISTOGRAM", "histogram(x)"),
    ("bit_and(x)", "aggregate function BIT_AND", "bit_and(x)"),
    ("kurtosis(y)", "aggregate function KURTOSIS", "kurtosis(y)"),
    ("ARG_MIN(DISTINCT s, x)", "ARG_MIN(DISTINCT", "ARG_MIN(DISTINCT"),
    ("MIN(x, 2)", "MIN with 2 argument(s)", "MIN(x, 2)"),
    ("ARG_MAX(s, x, 2)", "ARG_MAX with 3 argument(s)", "ARG_MAX(s"),
    ("QUANTILE_CONT(x)", "QUANTILE_CONT with 1 argument(s)", "QUANTILE_CONT(x)"),
    ("SUM(x ORDER BY y)", "ORDER BY inside SUM", "SUM(x ORDER"),
    ("MEDIAN(x ORDER BY y)", "ORDER BY inside MEDIAN", "MEDIAN("),
    ("STRING_AGG(s, ',')", "STRING_AGG without ORDER BY", "STRING_AGG(s"),
    ("LISTAGG(s)", "LISTAGG without ORDER BY", "LISTAGG(s)"),
    ("LIST(x)", "LIST without ORDER BY", "LIST(x)"),
    ("ARRAY_AGG(DISTINCT x)", "ARRAY_AGG without ORDER BY", "ARRAY_AGG("),
    ("STRING_AGG(s, s ORDER BY s)", "STRING_AGG with a non-constant argument", "STRING_AGG("),
    ("QUANTILE_DISC(x, k / 10)", "QUANTILE_DISC with a non-constant argument", "QUANTILE_DISC("),
    ("PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY x DESC)", "WITHIN GROUP", "PERCENTILE_DISC"),
]


@pytest.mark.parametrize(("select_list", "named", "at"), REFUSED)
def test_refused_calls_name_the_function_and_where(plan, pointed_at, select_list, named, at):
    sql = f"SELECT k,\n  {select_list} AS v FROM m GROUP BY k"
    with pytest.raises(UnsupportedSQL) as info:
        plan(sql)
    message = str(info.value)
    assert named in message
    assert "line 2, column 3" in message
    assert pointed_at(message, sql).startswith(at)


def test_unordered_lists_say_why(plan):
    with pytest.raises(UnsupportedSQL, match="its order is arbitrary.*add ORDER BY"):
        plan("SELECT k, LIST(s) AS v FROM m GROUP BY k")


def test_subqueries_inside_aggregate_calls_are_evaluated_per_row(con, plan):
    for sql in [
        "SELECT SUM((SELECT MAX(x) FROM m)) AS v FROM m",
        "SELECT k, SUM(x) FILTER (WHERE x > (SELECT MIN(x) FROM m)) AS v FROM m GROUP BY k",
    ]:
        assert Counter(con.execute(plain_sql(plan(sql))).fetchall()) == Counter(
            con.execute(sql).fetchall()
        ), sql


@pytest.mark.parametrize(
    "select_list",
    ["SUM(MAX(x))", "SUM(x) FILTER (WHERE MAX(x) > 1)", "LIST(x ORDER BY COUNT(*))"],
)
def test_a_true_nested_aggregate_is_an_sql_error(plan, select_list):
    with pytest.raises(SqlError, match="nested aggregate"):
        plan(f"SELECT {select_list} AS v FROM m")


def test_aggregate_in_where_points_at_it(plan, pointed_at):
    sql = "SELECT k FROM m WHERE SUM(x) > 1 GROUP BY k"
    with pytest.raises(SqlError, match="use HAVING") as info:
        plan(sql)
    assert pointed_at(str(info.value), sql).startswith("SUM(x)")


def test_ungrouped_column_points_at_it(plan, pointed_at):
    sql = "SELECT k, x + 1 AS v FROM m GROUP BY k"
    with pytest.raises(SqlError, match="column 'x'.*must appear in GROUP BY") as info:
        plan(sql)
    assert pointed_at(str(info.value), sql).startswith("x + 1")


def parts(select_list: str):
    tree = sqlglot.parse_one(f"SELECT {select_list} FROM m", read="duckdb")
    call = tree.expressions[0]
    return take_apart(call, Locator(tree.sql()))


def test_constants_may_be_literals_negated_literals_or_arrays_of_them():
    assert parts("QUANTILE_CONT(x, -0.5)").constants[0].sql("duckdb") == "-0.5"
    assert parts("QUANTILE_DISC(x, [0.1, -0.2])").constants[0].sql("duckdb") == "[0.1, -0.2]"
    for bad in ["QUANTILE_CONT(x, 0.1 + 0.2)", "QUANTILE_CONT(x, [y])", "QUANTILE_CONT(x, -y)"]:
        with pytest.raises(UnsupportedSQL, match="non-constant"):
            parts(bad)


def test_take_apart_reads_filter_distinct_and_order():
    found = parts("STRING_AGG(DISTINCT s, ';' ORDER BY s DESC) FILTER (WHERE c AND b)")
    assert found.func == "string_agg"
    assert found.distinct
    assert [c.sql() for c in found.columns] == ["s"]
    assert [c.sql() for c in found.constants] == ["';'"]
    assert [o.sql() for o in found.order] == ["s DESC"]
    assert isinstance(found.condition, exp.And)
    assert parts("COUNT(*)").func == parts("COUNT()").func == "count_star"
