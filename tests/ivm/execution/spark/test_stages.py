"""Cutting circuits into Spark stages (ivm.execution.spark.stages): keys, fused outputs,
carried inputs, names by fingerprint."""

from __future__ import annotations

import duckdb
import pytest

from ivm.circuit.incrementalize import incrementalize
from ivm.execution.embedded import describe
from ivm.execution.spark.stages import Stage, view_stages
from ivm.passes.binary_joins import binary_joins
from ivm.schema import Schema
from ivm.sql_frontend.planner import plan_query

TABLES = {
    "o": "CREATE TABLE o (id BIGINT, c INTEGER, amount DECIMAL(12,2), f FLOAT, d DOUBLE)",
    "c": "CREATE TABLE c (id INTEGER, region VARCHAR, f FLOAT, big BIGINT)",
}


def stages_of(sql: str) -> list[Stage]:
    con = duckdb.connect()
    for ddl in TABLES.values():
        con.execute(ddl)
    relations = {name: describe(con, f"SELECT * FROM {name}") for name in TABLES}

    def typed(query: str) -> Schema:
        return describe(con, query)

    plan = plan_query(sql, relations, typed)
    return view_stages(binary_joins(incrementalize(plan, "v", typed), partitioned=True))


def test_aggregate_over_join_stores_the_view_in_the_aggregate_stage() -> None:
    stages = stages_of("SELECT c.region, SUM(o.amount) AS s FROM o JOIN c ON o.c = c.id "
                       "GROUP BY c.region")
    assert [s.name.split("-")[0] for s in stages] == ["join", "aggregate"]
    join, aggregate = stages
    assert [i.key for i in join.inputs] == [("o.c",), ("c.id",)]
    assert aggregate.contents and not join.contents
    # Filters and projections travel as the base rows: keys named as base columns.
    assert [i.wire_key for i in join.inputs] == [("c",), ("id",)]
    assert all(i.carried is not None for i in join.inputs)


def test_an_output_that_drops_the_key_gets_its_own_stage() -> None:
    stages = stages_of("SELECT o.amount FROM o JOIN c ON o.c = c.id")
    assert [s.name.split("-")[0] for s in stages] == ["join", "output"]
    assert stages[-1].inputs[0].key == ("amount",) and stages[-1].contents


def test_a_computed_key_is_not_carried() -> None:
    stage = stages_of("SELECT k, COUNT(*) AS n FROM (SELECT c + 1 AS k FROM o) t GROUP BY k")[0]
    assert stage.name.startswith("aggregate-") and stage.inputs[0].carried is None


def test_global_aggregate_and_cross_join_run_on_one_partition() -> None:
    (aggregate,) = stages_of("SELECT COUNT(*) AS n FROM o")
    assert not aggregate.partitioned and aggregate.contents
    join = stages_of("SELECT o.id, c.region FROM o, c")[0]
    assert join.name.startswith("join-") and not join.partitioned


@pytest.mark.parametrize(
    ("condition", "partitioned"),
    [
        ("o.c = c.id", True),          # INTEGER = INTEGER
        ("o.id = c.big", True),        # BIGINT = BIGINT
        ("o.amount = c.big", True),    # DECIMAL = BIGINT: compared exactly, hashed as DOUBLE
        ("o.d = c.f", True),           # DOUBLE = FLOAT: compared as DOUBLE
        ("o.f = c.f", True),           # FLOAT = FLOAT
        ("o.c = c.f", False),          # INTEGER = FLOAT: DuckDB compares as FLOAT
        ("o.amount = c.f", False),     # DECIMAL = FLOAT: likewise
        ("CAST(o.id AS VARCHAR) = c.region", False),  # computed: no equi-key
    ],
)
def test_join_keys_hash_alike_only_when_equal_values_hash_alike(
    condition: str, partitioned: bool
) -> None:
    join = stages_of(f"SELECT o.id FROM o JOIN c ON {condition}")[0]
    assert join.partitioned == partitioned, condition


TC = ("WITH RECURSIVE r(a, b) AS (SELECT id, c FROM o UNION SELECT r.a, o.c FROM r "
      "JOIN o ON r.b = o.id) SELECT * FROM r")


def test_a_fixed_point_over_an_invariant_column_is_partitioned_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (stage,) = stages_of(TC)
    assert stage.partitioned and stage.contents
    assert [(i.key, i.replicated) for i in stage.inputs] == [(("a",), False), ((), True)]
    # State laid out on one partition (as before invariant columns) is another placement,
    # so a view's manifest differs and its state is rebuilt, never read as partitioned.
    from ivm.operators.fixed_point import FixedPoint

    monkeypatch.setattr(FixedPoint, "invariant", property(lambda self: None))
    alone = stages_of(TC)[0]  # then followed by a stage storing the view
    assert alone.name == stage.name and not alone.partitioned
    assert alone.placement == alone.name != stage.placement
