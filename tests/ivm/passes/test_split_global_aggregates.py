"""ivm.passes.split_global_aggregates: a global aggregate that keeps its rows becomes partials
per partition merged in one place, with the same meaning.

The rewritten circuit's plan and the original are rendered as plain SQL and run in DuckDB
over random small tables (NULLs, duplicates, empty tables) and must give the same rows;
Spark mode maintains the split views under random CDC and equals DuckDB recomputation.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.circuit.incrementalize import incrementalize
from ivm.execution.embedded import describe
from ivm.operators.aggregate import Aggregate, LocalAggregate
from ivm.operators.scan import Scan
from ivm.passes.split_global_aggregates import split_global_aggregates
from ivm.plan.node import Plan, plain_sql
from ivm.sql_frontend.planner import plan_query

T = "CREATE TABLE t (id INTEGER, x INTEGER, d DECIMAL(12,2), f DOUBLE, s VARCHAR, ok BOOLEAN)"

SPLIT = {
    "extremes": "SELECT MAX(x) AS hx, MIN(s) AS ls, COUNT(*) AS n, COUNT(x) AS cx, "
                "SUM(d) AS sd, SUM(x) AS sx FROM t",
    "filtered": "SELECT MIN(d) FILTER (WHERE ok) AS ld, COUNT(*) FILTER (WHERE x > 1) AS n, "
                "BOOL_AND(ok) AS a, BOOL_OR(x > 2) AS o FROM t",
    "distinct": "SELECT COUNT(DISTINCT x) AS cd, SUM(DISTINCT x) AS sd, MAX(d) AS hd, "
                "MIN(DISTINCT s) AS ls FROM t",
    "distinct_filtered": "SELECT COUNT(DISTINCT s) FILTER (WHERE ok) AS cs, MAX(f) AS hf FROM t",
    "in_expression": "SELECT MAX(x) + COUNT(*) AS e, MIN(x) IS NULL AS empty FROM t WHERE x <> 2",
}
KEPT = {
    "invertible": "SELECT COUNT(*) AS n, SUM(x) AS sx, AVG(d) AS ad FROM t",  # one row of sums
    "float_sum": "SELECT SUM(f) AS sf, MAX(x) AS hx FROM t",  # a sum of rounded partials
    "median": "SELECT MEDIAN(x) AS m, MAX(x) AS hx FROM t",
    "two_distinct": "SELECT COUNT(DISTINCT x) AS a, COUNT(DISTINCT s) AS b FROM t",
    "grouped": "SELECT s, MAX(x) AS hx FROM t GROUP BY s",
}

_TYPING = duckdb.connect()
_TYPING.execute(T)


def plan_of(sql: str) -> Plan:
    relations = {"t": describe(_TYPING, "SELECT * FROM t")}
    return plan_query(sql, relations, lambda text: describe(_TYPING, text))


def split(plan: Plan, partitioned: bool = True) -> Plan:
    typing = lambda sql: describe(_TYPING, sql)  # noqa: E731
    circuit = incrementalize(plan, "v", typing)
    return split_global_aggregates(circuit, partitioned=partitioned, describe=typing).output.node


def random_tables(seed: int) -> duckdb.DuckDBPyConnection:
    rng = random.Random(seed)
    con = duckdb.connect()
    con.execute(T)
    rows = []
    for i in range(rng.choice([0, 1, 3, 12])):
        x = "NULL" if rng.random() < 0.2 else rng.randint(0, 3)
        d = "NULL" if rng.random() < 0.2 else rng.randint(-5, 5) / 2
        f = "NULL" if rng.random() < 0.2 else rng.random()
        s = "NULL" if rng.random() < 0.2 else repr(rng.choice("abc"))
        ok = rng.choice(["true", "false", "NULL"])
        rows.append(f"({i}, {x}, {d}, {f}, {s}, {ok})")
    rows += rng.sample(rows, k=min(len(rows), 2))  # duplicates
    if rows:
        con.execute(f"INSERT INTO t VALUES {', '.join(rows)}")
    return con


@pytest.mark.parametrize("name", list(SPLIT))
def test_the_split_plan_computes_the_same_rows(name: str) -> None:
    original = plan_of(SPLIT[name])
    rewritten = split(original)
    locals_ = [n for n in rewritten.walk() if isinstance(n, LocalAggregate)]
    assert len(locals_) == 1
    merges = [n for n in rewritten.walk() if type(n) is Aggregate]
    assert len(merges) == 1 and merges[0].input is locals_[0]
    assert rewritten.schema == original.schema
    for seed in range(12):
        con = random_tables(seed)
        expected = con.sql(plain_sql(original)).fetchall()
        assert con.sql(plain_sql(rewritten)).fetchall() == expected, seed


def replaced(plan: Plan, old: Plan, new: Plan) -> Plan:
    """``plan`` with node ``old`` replaced by ``new``."""
    if plan is old:
        return new
    return plan.with_children([replaced(c, old, new) for c in plan.children()])


def partitioned_result(con: duckdb.DuckDBPyConnection, plan: Plan, parts: int) -> list[Any]:
    """``plan``'s rows with its local aggregate computed apart in ``parts`` partitions (rows
    hashed by its partition key, as Spark places them) and the partials merged."""
    (local,) = [n for n in plan.walk() if isinstance(n, LocalAggregate)]
    con.execute(f"CREATE OR REPLACE TABLE inp AS {plain_sql(local.input)}")
    key = ", ".join(f'"{c}"' for c in local.partition_by)
    partials = []
    for p in range(parts):
        con.execute(f"CREATE OR REPLACE TABLE inp{p} AS SELECT * FROM inp "
                    f"WHERE hash({key}) % {parts} = {p}")
        partials.append(plain_sql(replaced(local, local.input,
                                           Scan(schema=local.input.schema, name=f"inp{p}"))))
    con.execute(f"CREATE OR REPLACE TABLE partials AS {' UNION ALL '.join(partials)}")
    merged = replaced(plan, local, Scan(schema=local.schema, name="partials"))
    return con.sql(plain_sql(merged)).fetchall()


@pytest.mark.parametrize("name", list(SPLIT))
def test_partials_of_any_partitioning_merge_into_the_aggregate(name: str) -> None:
    original = plan_of(SPLIT[name])
    rewritten = split(original)
    for seed in range(12):
        con = random_tables(seed)
        expected = con.sql(plain_sql(original)).fetchall()
        for parts in (2, 3):
            assert partitioned_result(con, rewritten, parts) == expected, (seed, parts)


def test_distinct_calls_partition_rows_by_their_argument() -> None:
    (local,) = [n for n in split(plan_of(SPLIT["distinct"])).walk()
                if isinstance(n, LocalAggregate)]
    assert len(local.partition_by) == 1
    assert local.input.schema.type_of(local.partition_by[0]) == "INTEGER"  # x, not the row


@pytest.mark.parametrize("name", list(KEPT))
def test_aggregates_that_do_not_merge_from_partials_stay_whole(name: str) -> None:
    original = plan_of(KEPT[name])
    assert not any(isinstance(n, LocalAggregate) for n in split(original).walk())


def test_only_partitioned_execution_splits() -> None:
    original = plan_of(SPLIT["extremes"])
    assert not any(isinstance(n, LocalAggregate)
                   for n in split(original, partitioned=False).walk())


@pytest.fixture
def spark_db(spark: Any, tmp_path: Path) -> Any:
    db = ivm.connect(tmp_path / "state", spark=spark, partitions=SPARK_PARTITIONS)
    yield db
    db.close()


def test_explain_shows_the_partitioned_partials_and_why_the_merge_is_alone(spark_db: Any) -> None:
    spark_db.execute(f"{T}; CREATE VIEW v AS {SPLIT['extremes']}; "
                     "CREATE VIEW w AS SELECT MEDIAN(x) AS m FROM t")
    text = spark_db.explain("v")
    assert "in each partition (rows by [" in text
    stages = text.split("spark stages")[1].splitlines()[1:]
    assert len(stages) == 2
    assert " on one partition" not in stages[0]  # the partials: by whole row
    assert "on one partition (merges the partitions' partial aggregates" in stages[1]
    assert "do not merge from partials" in spark_db.explain("w")


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_split_global_aggregates_on_spark(data: st.DataObject, spark: Any,
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("split-global")
    views = {name: SPLIT[name] for name in ("extremes", "distinct", "distinct_filtered")}
    run_workload([T], views, data, epochs=3, modes=("one", "one", "clear"),
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
