"""ivm.passes.binary_joins: n-way joins become left-deep binary joins with the same meaning.

Plans come from the real planner over DuckDB tables; the pass rewrites their
circuits, and the rewritten circuit's plan and the original plan are both
rendered as plain SQL and run in DuckDB over random small tables (NULLs,
duplicates), and must give the same bag of rows.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import duckdb
import pytest

from ivm.circuit.circuit import Circuit
from ivm.circuit.incrementalize import incrementalize
from ivm.execution.embedded import describe
from ivm.operators.join import DeltaJoin, Join
from ivm.operators.project import Project
from ivm.passes.binary_joins import binary_joins
from ivm.plan.node import Plan, plain_sql
from ivm.schema import Schema
from ivm.sql_frontend.planner import plan_query

_TYPING = duckdb.connect()


def circuit_of(plan: Plan) -> Circuit:
    return incrementalize(plan, "v", lambda sql: describe(_TYPING, sql))


def rewrite(plan: Plan) -> Plan:
    """The plan of ``plan``'s circuit after the pass (as a partitioned executor runs it)."""
    return binary_joins(circuit_of(plan), partitioned=True).output.node

TABLES = {
    "a": "k INTEGER, v INTEGER",
    "b": "k INTEGER, v INTEGER",
    "c": "k INTEGER, v INTEGER",
    "d": "k INTEGER, v VARCHAR",
    "o": "id INTEGER, c INTEGER, p INTEGER, qty INTEGER",
    "cu": "id INTEGER, name VARCHAR",
    "pr": "id INTEGER, price INTEGER",
}

STAR = "SELECT * FROM o JOIN cu ON o.c = cu.id JOIN pr ON o.p = pr.id"

QUERIES = {
    "star": STAR,
    "star_reversed_equalities": "SELECT * FROM o JOIN cu ON cu.id = o.c JOIN pr ON pr.id = o.p",
    "cross_then_equi": "SELECT * FROM a CROSS JOIN b JOIN c ON c.k = b.k",
    "comma_cross": "SELECT a.v, b.v AS bv, c.v AS cv FROM a, b, c",
    "non_equi_over_three": (
        "SELECT * FROM a JOIN b ON a.k = b.k JOIN c ON c.k = b.v AND a.v + b.v > c.v"
    ),
    "four_way": (
        "SELECT a.v AS av, b.v AS bv, c.v AS cv, d.v AS dv FROM a "
        "JOIN b ON a.k = b.k JOIN c ON c.k = b.v JOIN d ON d.k = c.v AND d.v <> 'x'"
    ),
    "reordered": "SELECT * FROM a JOIN b ON true JOIN c ON c.k = a.k JOIN d ON d.k = b.k",
    "reordered_multi_conjunct": "SELECT * FROM a JOIN b ON true JOIN c ON c.k = a.k AND c.v = b.v",
    "where_equalities": "SELECT * FROM a, b, c WHERE a.k = b.k AND b.v = c.k",
    "where_or": "SELECT * FROM a, b, c WHERE a.k = b.k AND (a.v = b.v OR b.v = 1) AND b.v = c.k",
    "self_join": "SELECT x.k, y.v, z.v AS zv FROM a AS x JOIN a AS y ON x.k = y.v JOIN a AS z "
    "ON z.k = y.k",
    "join_of_aggregate": (
        "SELECT a.k, s.total, c.v FROM a JOIN (SELECT k, SUM(v) AS total FROM b GROUP BY k) AS s "
        "ON s.k = a.k JOIN c ON c.k = a.v"
    ),
    "aggregate_over_join": (
        "SELECT cu.name, COUNT(*) AS n, SUM(o.qty * pr.price) AS revenue "
        "FROM o JOIN cu ON o.c = cu.id JOIN pr ON o.p = pr.id GROUP BY cu.name"
    ),
    "cte_twice": (
        "WITH j AS (SELECT a.k, b.v AS bv, c.v AS cv FROM a JOIN b ON a.k = b.k "
        "JOIN c ON c.k = b.v) SELECT x.k, x.bv, y.cv FROM j AS x JOIN j AS y ON x.k = y.bv "
        "JOIN d ON d.k = x.cv"
    ),
    "constant_conjunct": "SELECT * FROM a JOIN b ON 1 = 1 JOIN c ON c.k = b.k AND 2 > 1",
    "union_of_joins": (
        "SELECT a.k, c.v FROM a JOIN b ON a.k = b.k JOIN c ON c.k = b.v "
        "UNION ALL SELECT b.k, a.v FROM b JOIN a ON a.v = b.v JOIN c ON c.v = a.k"
    ),
}


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    for name, columns in TABLES.items():
        connection.execute(f"CREATE TABLE {name} ({columns})")
    yield connection
    connection.close()


def relations(con: duckdb.DuckDBPyConnection) -> dict[str, Schema]:
    return {name: describe(con, f"SELECT * FROM {name}") for name in TABLES}


def plan_of(con: duckdb.DuckDBPyConnection, sql: str) -> Plan:
    return plan_query(sql, relations(con), lambda text: describe(con, text))


def joins(plan: Plan) -> list[Join]:
    return [n for n in plan.walk() if isinstance(n, Join)]


SEEDS = range(10)


def value(rng: random.Random, type_: str) -> str:
    if rng.random() < 0.15:
        return "NULL"
    if "VARCHAR" in type_:
        return repr(rng.choice(["x", "y", "z"]))
    return str(rng.randint(0, 2))


def random_tables(seed: int) -> duckdb.DuckDBPyConnection:
    """Small random tables: values 0..2 (so joins match), NULLs, duplicate rows."""
    rng = random.Random(seed)
    connection = duckdb.connect()
    for name, columns in TABLES.items():
        connection.execute(f"CREATE TABLE {name} ({columns})")
        types = columns.split(", ")
        rows = [f"({', '.join(value(rng, t) for t in types)})" for _ in range(rng.randint(0, 9))]
        rows += rng.sample(rows, k=min(len(rows), 3))  # duplicates
        if rows:
            connection.execute(f"INSERT INTO {name} VALUES {', '.join(rows)}")
    return connection


@pytest.fixture(scope="module")
def datasets() -> Iterator[list[duckdb.DuckDBPyConnection]]:
    connections = [random_tables(seed) for seed in SEEDS]
    yield connections
    for connection in connections:
        connection.close()


def bag(con: duckdb.DuckDBPyConnection, sql: str) -> Counter:
    return Counter(con.execute(sql).fetchall())


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_join_becomes_binary(con: duckdb.DuckDBPyConnection, name: str) -> None:
    plan = plan_of(con, QUERIES[name])
    rewritten = rewrite(plan)
    assert joins(rewritten), "the corpus query has a join"
    for join in joins(rewritten):
        assert len(join.relations) == 2
        assert join.schema.columns == tuple(c for r in join.relations for c in r.schema.columns)


def wide_joins(plan: Plan) -> list[Join]:
    return [j for j in joins(plan) if len(j.relations) > 2]


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_output_schema_is_unchanged(con: duckdb.DuckDBPyConnection, name: str) -> None:
    plan = plan_of(con, QUERIES[name])
    rewritten = rewrite(plan)
    assert rewritten.schema == plan.schema
    # each n-way join's replacement alone keeps its columns in order, too
    for join in wide_joins(plan):
        replacement = rewrite(join)
        assert replacement.schema == join.schema
        assert describe(con, plain_sql(replacement)) == describe(con, plain_sql(join))
    # and DuckDB agrees on names, order and types of the rendered SQL
    assert describe(con, plain_sql(rewritten)) == describe(con, plain_sql(plan))


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_rewritten_plan_computes_the_same_rows(
    con: duckdb.DuckDBPyConnection, datasets: list[duckdb.DuckDBPyConnection], name: str
) -> None:
    plan = plan_of(con, QUERIES[name])
    # the whole query, and each n-way join on its own (tuples compare column by column)
    pairs = [(plain_sql(plan), plain_sql(rewrite(plan)))]
    pairs += [(plain_sql(j), plain_sql(rewrite(j))) for j in wide_joins(plan)]
    nonempty = 0
    for seed, data in zip(SEEDS, datasets, strict=True):
        for original, rewritten in pairs:
            expected = bag(data, original)
            assert bag(data, rewritten) == expected, f"seed {seed}: {rewritten}"
        nonempty += bool(bag(data, pairs[0][0]))
    assert nonempty >= 3, "the random tables should make most joins produce rows"


def test_star_join_gives_binary_joins_each_with_an_equi_key(
    con: duckdb.DuckDBPyConnection,
) -> None:
    circuit = binary_joins(circuit_of(plan_of(con, STAR)), partitioned=True)
    delta_joins = [op for op in circuit.operators if isinstance(op, DeltaJoin)]
    assert len(delta_joins) == 2
    found = []
    for op in delta_joins:
        keys = op.join.equi_keys()
        assert len(keys) == 1
        left, right = (set(r.schema.names) for r in op.node.relations)
        ((a, b),) = keys
        assert (a in left and b in right) or (a in right and b in left)
        found.append(frozenset((a, b)))
    assert set(found) == {frozenset(("o.c", "cu.id")), frozenset(("o.p", "pr.id"))}


def test_without_the_rewrite_the_star_join_has_no_binary_key(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # the reason for the pass: one 3-way delta join, whose equalities name three inputs
    circuit = circuit_of(plan_of(con, STAR))
    (op,) = [op for op in circuit.operators if isinstance(op, DeltaJoin)]
    assert len(op.node.relations) == 3


def test_next_relation_is_one_connected_by_an_equality(con: duckdb.DuckDBPyConnection) -> None:
    # b is joined ON true, c is connected to a: the order is a, c, then b (a cross product)
    rewritten = rewrite(plan_of(con, QUERIES["reordered"]))
    inner = min(joins(rewritten), key=lambda j: len(j.schema))
    names = [r.schema.names for r in inner.relations]
    assert names == [["a.k", "a.v"], ["c.k", "c.v"]]
    # the original column order comes back through a projection
    assert any(isinstance(n, Project) and n.input in joins(rewritten) for n in rewritten.walk())


def test_equalities_inside_a_multi_conjunct_on_clause_choose_the_order(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # c.k = a.k connects c to a; the documented order is a, c, then b (joined on c.v = b.v)
    circuit = binary_joins(
        circuit_of(plan_of(con, QUERIES["reordered_multi_conjunct"])), partitioned=True
    )
    delta_joins = [op for op in circuit.operators if isinstance(op, DeltaJoin)]
    assert len(delta_joins) == 2
    assert all(op.join.equi_keys() for op in delta_joins)


def test_where_equalities_give_equi_keys(con: duckdb.DuckDBPyConnection) -> None:
    circuit = binary_joins(circuit_of(plan_of(con, QUERIES["where_equalities"])), partitioned=True)
    delta_joins = [op for op in circuit.operators if isinstance(op, DeltaJoin)]
    assert delta_joins
    assert all(op.join.equi_keys() for op in delta_joins)


def test_non_equi_conjunct_is_placed_where_its_columns_meet(
    con: duckdb.DuckDBPyConnection,
) -> None:
    rewritten = rewrite(plan_of(con, QUERIES["non_equi_over_three"]))
    inner, outer = sorted(joins(rewritten), key=lambda j: len(j.schema))
    assert inner.condition is not None and outer.condition is not None
    assert inner.condition.sql() == '"a.k" = "b.k"'
    assert '"a.v" + "b.v" > "c.v"' in outer.condition.sql()
    assert '"c.k" = "b.v"' in outer.condition.sql()


def test_cross_join_keeps_no_condition(con: duckdb.DuckDBPyConnection) -> None:
    rewritten = rewrite(plan_of(con, QUERIES["comma_cross"]))
    assert [j.condition for j in joins(rewritten)] == [None, None]


def test_four_way_join_is_left_deep(con: duckdb.DuckDBPyConnection) -> None:
    rewritten = rewrite(plan_of(con, QUERIES["four_way"]))
    found = joins(rewritten)
    assert len(found) == 3
    for join in found:
        # left-deep: the right input is never itself a join
        assert not isinstance(join.relations[1], Join)
    assert sum(isinstance(j.relations[0], Join) for j in found) == 2


def test_shared_subplan_stays_one_node(con: duckdb.DuckDBPyConnection) -> None:
    plan = plan_of(con, QUERIES["cte_twice"])
    rewritten = rewrite(plan)
    # the CTE's 3-way join became two binary joins, once; the outer 3-way join two more
    assert len(joins(plan)) == 2
    assert len(joins(rewritten)) == 4
    uses = [
        n
        for n in rewritten.walk()
        if isinstance(n, Project) and n.schema.names[:1] in (["x.k"], ["y.k"])
    ]
    assert len(uses) == 2
    assert uses[0].input is uses[1].input
    # both uses read one operator in the circuit too
    circuit = binary_joins(circuit_of(plan), partitioned=True)
    assert len([op for op in circuit.operators if isinstance(op, DeltaJoin)]) == 4


def test_plan_without_wide_joins_is_returned_as_is(con: duckdb.DuckDBPyConnection) -> None:
    plan = plan_of(con, "SELECT a.k, SUM(b.v) AS s FROM a JOIN b ON a.k = b.k GROUP BY a.k")
    circuit = circuit_of(plan)
    assert binary_joins(circuit, partitioned=True) is circuit
    # and embedded execution keeps n-way joins: the pass does nothing there
    star = circuit_of(plan_of(con, STAR))
    assert binary_joins(star) is star
