"""sql_frontend.planner.plan_query: plan node types and shapes for typical queries.

The describe callback runs DuckDB's DESCRIBE on a connection where the tables exist,
as the session does.
"""

from __future__ import annotations

from collections import Counter

import duckdb
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
from ivm.schema import Column, Schema
from ivm.sql_frontend.planner import plan_query

TABLES = {
    "orders": Schema((Column("id", "BIGINT"), Column("customer", "VARCHAR"),
                      Column("amount", "BIGINT"))),
    "customers": Schema((Column("name", "VARCHAR"), Column("city", "VARCHAR"))),
}


@pytest.fixture(scope="module")
def con():
    connection = duckdb.connect()
    for name, schema in TABLES.items():
        columns = ", ".join(f'"{c.name}" {c.type}' for c in schema.columns)
        connection.execute(f'CREATE TABLE "{name}" ({columns})')
    connection.execute("""
        INSERT INTO orders VALUES (1, 'ann', 10), (2, 'ann', 5), (3, 'bob', 7), (4, 'zed', 1);
        INSERT INTO customers VALUES ('ann', 'oslo'), ('bob', 'oslo'), ('cy', 'rome');
    """)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def describe(con):
    def run(sql: str) -> Schema:
        try:
            rows = con.execute(f"DESCRIBE {sql}").fetchall()
        except duckdb.Error as error:
            raise SqlError(str(error)) from error
        return Schema(tuple(Column(r[0], r[1]) for r in rows))

    return run


def plan(sql: str, describe) -> Plan:
    return plan_query(sql, TABLES, describe)


def nodes(root: Plan, kind: type) -> list:
    return [n for n in root.walk() if isinstance(n, kind)]


def bag(con, sql: str) -> Counter:
    return Counter(con.execute(sql).fetchall())


JOIN_AGGREGATE = """
    SELECT c.city, SUM(o.amount) AS total, COUNT(*) AS n, MAX(o.amount) AS top
    FROM orders o JOIN customers c ON o.customer = c.name
    GROUP BY c.city
"""


def test_join_aggregate_plan_shape(describe):
    root = plan(JOIN_AGGREGATE, describe)
    assert root.schema.names == ["city", "total", "n", "top"]
    assert root.schema.type_of("n") == "BIGINT"
    assert root.schema.type_of("city") == "VARCHAR"
    assert isinstance(root, Project)

    joins = nodes(root, Join)
    assert len(joins) == 1
    join = joins[0]
    assert len(join.relations) == 2
    assert join.condition is not None
    assert len(join.schema) == 5  # 3 order columns + 2 customer columns
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


def test_join_aggregate_plain_sql_matches_duckdb(con, describe):
    root = plan(JOIN_AGGREGATE, describe)
    assert bag(con, plain_sql(root)) == bag(con, JOIN_AGGREGATE) == Counter(
        {("oslo", 22, 3, 10): 1}
    )


def test_same_aggregate_twice_is_one_call(describe):
    root = plan("SELECT customer, SUM(amount) AS a, SUM(amount) * 2 AS b FROM orders "
                "GROUP BY customer", describe)
    (aggregate,) = nodes(root, Aggregate)
    assert [c.func for c in aggregate.calls] == ["sum"]


def test_global_aggregate_has_no_keys(con, describe):
    sql = "SELECT COUNT(*) AS n FROM orders"
    root = plan(sql, describe)
    (aggregate,) = nodes(root, Aggregate)
    assert aggregate.keys == ()
    assert [c.func for c in aggregate.calls] == ["count_star"]
    assert bag(con, plain_sql(root)) == Counter({(4,): 1})


def test_filter_and_having(con, describe):
    sql = ("SELECT customer, SUM(amount) AS s FROM orders WHERE amount > 1 "
           "GROUP BY customer HAVING COUNT(*) > 1")
    root = plan(sql, describe)
    filters = nodes(root, Filter)
    assert len(filters) == 2  # WHERE below the aggregate, HAVING above it
    (aggregate,) = nodes(root, Aggregate)
    below = list(aggregate.walk())
    assert sum(f in below for f in filters) == 1
    assert {c.func for c in aggregate.calls} == {"sum", "count_star"}
    assert bag(con, plain_sql(root)) == bag(con, sql) == Counter({("ann", 15): 1})


def test_three_way_join_is_one_join_node(describe):
    root = plan("SELECT a.id FROM orders a JOIN orders b ON a.id = b.id "
                "JOIN customers c ON a.customer = c.name", describe)
    (join,) = nodes(root, Join)
    assert len(join.relations) == 3


def test_cross_join_has_no_condition(describe):
    root = plan("SELECT o.id, c.city FROM orders o CROSS JOIN customers c", describe)
    (join,) = nodes(root, Join)
    assert join.condition is None


def test_distinct_and_union(describe):
    root = plan("SELECT DISTINCT customer FROM orders", describe)
    assert isinstance(root, Distinct)
    root = plan("SELECT customer FROM orders UNION ALL SELECT name FROM customers", describe)
    assert len(nodes(root, UnionAll)) == 1
    assert not nodes(root, Distinct)
    root = plan("SELECT customer FROM orders UNION SELECT name FROM customers", describe)
    assert isinstance(root, Distinct)
    assert isinstance(root.input, UnionAll)


def test_cte_used_twice_is_one_node(describe):
    root = plan("WITH big AS (SELECT id FROM orders WHERE amount > 5) "
                "SELECT a.id FROM big a JOIN big b ON a.id = b.id", describe)
    assert len(nodes(root, Filter)) == 1
    assert len(nodes(root, Scan)) == 1


def test_star_is_expanded(describe):
    root = plan("SELECT * FROM orders", describe)
    assert root.schema.names == ["id", "customer", "amount"]


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT o.id FROM orders o LEFT JOIN customers c ON o.customer = c.name", "LEFT JOIN"),
        ("SELECT id FROM orders LIMIT 1", "LIMIT"),
        ("SELECT id, rank() OVER (ORDER BY amount) AS r FROM orders", "window"),
        ("SELECT ARG_MIN(DISTINCT id, amount) AS n FROM orders", "DISTINCT"),
        ("SELECT id FROM orders WHERE amount > (SELECT 1)", "subquery"),
    ],
)
def test_unsupported_constructs(describe, sql, construct):
    with pytest.raises(UnsupportedSQL) as info:
        plan(sql, describe)
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
def test_sql_errors(describe, sql):
    with pytest.raises(SqlError):
        plan(sql, describe)
