"""sql_frontend.planner.plan_query: plan node types and shapes for typical queries.

The ``plan`` fixture (conftest) plans over the fixture tables; its describe callback runs
DuckDB's DESCRIBE on a connection where the tables exist, as the session does.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ivm.errors import SqlError, UnsupportedSQL
from ivm.operators.aggregate import Aggregate
from ivm.operators.distinct import Distinct
from ivm.operators.filter import Filter
from ivm.operators.join import Join
from ivm.operators.project import Project
from ivm.operators.scan import Scan
from ivm.operators.union_all import UnionAll
from ivm.plan.node import Plan, plain_sql


def nodes(root: Plan, kind: type) -> list:
    return [n for n in root.walk() if isinstance(n, kind)]


def bag(con, sql: str) -> Counter:
    return Counter(con.execute(sql).fetchall())


JOIN_AGGREGATE = """
    SELECT c.city, SUM(o.amount) AS total, COUNT(*) AS n, MAX(o.amount) AS top
    FROM orders o JOIN customers c ON o.customer = c.name
    GROUP BY c.city
"""


def test_join_aggregate_plan_shape(plan):
    root = plan(JOIN_AGGREGATE)
    assert root.schema.names == ["city", "total", "n", "top"]
    assert root.schema.type_of("n") == "BIGINT"
    assert root.schema.type_of("city") == "VARCHAR"
    assert isinstance(root, Project)

    joins = nodes(root, Join)
    assert len(joins) == 1
    join = joins[0]
    assert len(join.relations) == 2
    assert join.condition is not None
    assert len(join.schema) == 4  # 2 order columns + 2 customer columns (o.id is unread)
    scans = sorted(s.name for s in nodes(join, Scan))
    assert scans == ["customers", "orders"]

    aggregates = nodes(root, Aggregate)
    assert len(aggregates) == 1
    aggregate = aggregates[0]
    assert len(aggregate.keys) == 1
    assert all(k in aggregate.input.schema.names for k in aggregate.keys)
    assert sorted(c.func for c in aggregate.calls) == ["count_star", "max", "sum"]
    for call in aggregate.calls:
        if call.func == "count_star":
            assert call.arg is None
        else:
            assert call.arg in aggregate.input.schema.names
    # aggregate output: keys then one column per call
    assert aggregate.schema.names == [*aggregate.keys, *(c.name for c in aggregate.calls)]
    # the aggregate sits above the join
    assert join in list(aggregate.walk())
    assert root.sources() == frozenset({"orders", "customers"})


def test_join_aggregate_plain_sql_matches_duckdb(con, plan):
    root = plan(JOIN_AGGREGATE)
    assert bag(con, plain_sql(root)) == bag(con, JOIN_AGGREGATE) == Counter(
        {("oslo", 22, 3, 10): 1}
    )


def test_same_aggregate_twice_is_one_call(plan):
    root = plan("SELECT customer, SUM(amount) AS a, SUM(amount) * 2 AS b FROM orders "
                "GROUP BY customer")
    (aggregate,) = nodes(root, Aggregate)
    assert [c.func for c in aggregate.calls] == ["sum"]


def test_global_aggregate_has_no_keys(con, plan):
    sql = "SELECT COUNT(*) AS n FROM orders"
    root = plan(sql)
    (aggregate,) = nodes(root, Aggregate)
    assert aggregate.keys == ()
    assert [c.func for c in aggregate.calls] == ["count_star"]
    assert bag(con, plain_sql(root)) == Counter({(4,): 1})


def test_filter_and_having(con, plan):
    sql = ("SELECT customer, SUM(amount) AS s FROM orders WHERE amount > 1 "
           "GROUP BY customer HAVING COUNT(*) > 1")
    root = plan(sql)
    filters = nodes(root, Filter)
    assert len(filters) == 2  # WHERE below the aggregate, HAVING above it
    (aggregate,) = nodes(root, Aggregate)
    below = list(aggregate.walk())
    assert sum(f in below for f in filters) == 1
    assert {c.func for c in aggregate.calls} == {"sum", "count_star"}
    assert bag(con, plain_sql(root)) == bag(con, sql) == Counter({("ann", 15): 1})


def test_three_way_join_is_one_join_node(plan):
    root = plan("SELECT a.id FROM orders a JOIN orders b ON a.id = b.id "
                "JOIN customers c ON a.customer = c.name")
    (join,) = nodes(root, Join)
    assert len(join.relations) == 3


def test_cross_join_has_no_condition(plan):
    root = plan("SELECT o.id, c.city FROM orders o CROSS JOIN customers c")
    (join,) = nodes(root, Join)
    assert join.condition is None


def test_distinct_and_union(plan):
    root = plan("SELECT DISTINCT customer FROM orders")
    assert isinstance(root, Distinct)
    root = plan("SELECT customer FROM orders UNION ALL SELECT name FROM customers")
    assert len(nodes(root, UnionAll)) == 1
    assert not nodes(root, Distinct)
    root = plan("SELECT customer FROM orders UNION SELECT name FROM customers")
    assert isinstance(root, Distinct)
    assert isinstance(root.input, UnionAll)


def test_cte_used_twice_is_one_node(plan):
    root = plan("WITH big AS (SELECT id FROM orders WHERE amount > 5) "
                "SELECT a.id FROM big a JOIN big b ON a.id = b.id")
    assert len(nodes(root, Filter)) == 1
    assert len(nodes(root, Scan)) == 1


def test_star_is_expanded(plan):
    root = plan("SELECT * FROM orders")
    assert root.schema.names == ["id", "customer", "amount"]


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT o.id FROM orders o ASOF RIGHT JOIN customers c ON o.customer >= c.name",
         "ASOF RIGHT JOIN"),
        ("SELECT id FROM orders LIMIT 1", "LIMIT"),
        ("SELECT id FROM orders ORDER BY rank() OVER (ORDER BY amount)", "window function"),
        ("SELECT ARG_MIN(DISTINCT id, amount) AS n FROM orders", "DISTINCT"),
        ("SELECT id, (SELECT MAX(p.amount) FROM orders p WHERE p.id = o.id GROUP BY p.id) "
         "AS s FROM orders o", "subquery"),
    ],
)
def test_unsupported_constructs(sql, construct, plan):
    with pytest.raises(UnsupportedSQL) as info:
        plan(sql)
    assert construct.lower() in str(info.value).lower()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM nope",
        "SELECT nope FROM orders",
        "SELECT customer, amount FROM orders GROUP BY customer",
        "SELEC 1",
    ],
)
def test_sql_errors(sql, plan):
    with pytest.raises(SqlError):
        plan(sql)
