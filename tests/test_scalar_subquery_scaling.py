"""Uncorrelated scalar subqueries: a view's SQL, circuit and state grow linearly with their
number (issue #22, defect 5: TPC-DS q9's fifteen subqueries once ran for minutes in
gigabytes), and such views stay exact under random CDC, embedded and on Spark.

Each subquery's value is a one-row relation; the planner gathers them in one ``Product``
(recomputed whole when one changes) under one join with the outer rows, instead of a
chain of binary joins whose delta queries re-read every change below them twice per
level (2ⁿ). Linearity is measured in sizes, which do not vary from run to run: the SQL
of the statements a creation and an epoch run, the SQL DuckDB is asked to DESCRIBE while
planning, the circuit's operators and the traces it keeps; times are checked within a
bound loose enough for a loaded machine that still catches any growth past linear
but a slight one (2ⁿ took minutes at 15).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.execution import embedded

pytestmark = pytest.mark.xdist_group("scalar_subquery_scaling")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

TABLE = "CREATE TABLE t (k INTEGER, x INTEGER)"
DOMAINS: dict[str, tuple[Any, ...]] = {"t.k": (None, 0, 1, 2), "t.x": (None, 0, 1, 2, 3, 4)}


def subquery(i: int) -> str:
    """The i-th scalar subquery: an aggregate over its own slice of ``t`` (each one
    different: equal subqueries would be planned once)."""
    call = ("COUNT(*)", "SUM(x)", "MAX(x)", "MIN(k)")[i % 4]
    return f"(SELECT {call} FROM t WHERE x BETWEEN {i % 4} AND {i % 4 + 2} OR k = {i + 3})"


def view_sql(n: int) -> str:
    """A view with ``n`` uncorrelated scalar subqueries, q9-style: three to a CASE."""
    items, i = [], 0
    while i < n:
        if n - i >= 3:
            items.append(f"CASE WHEN {subquery(i)} > 1 THEN {subquery(i + 1)} "
                         f"ELSE {subquery(i + 2)} END AS c{i}")
            i += 3
        else:
            items.append(f"{subquery(i)} AS c{i}")
            i += 1
    return f"SELECT k, {', '.join(items)} FROM t WHERE k IS DISTINCT FROM 2"


@dataclass(frozen=True)
class Sizes:
    """What one view costs, in characters and counts."""

    create_sql: int
    """SQL text of every statement creating the view ran (its first epoch)."""
    epoch_sql: int
    """SQL text of every statement of one later epoch."""
    described: int
    """SQL text DuckDB was asked to DESCRIBE while the view was planned."""
    operators: int
    traces: int
    seconds: float
    """Wall time of the creation and the epoch."""


@contextmanager
def spied() -> Iterator[tuple[list[int], list[int]]]:
    """The lengths of the statements run and of the queries described meanwhile."""
    ran: list[int] = []
    described: list[int] = []
    run, describe = embedded.run_sql, embedded.describe

    def run_spy(con: Any, sql: str, *where: Any) -> int:
        ran.append(len(sql))
        return run(con, sql, *where)

    def describe_spy(con: Any, sql: str) -> Any:
        described.append(len(sql))
        return describe(con, sql)

    # every module that imported them holds its own name for them
    holders = [m for name, m in sys.modules.items() if name.startswith("ivm")]
    patched = [(m, attr, spy) for m in holders
               for attr, original, spy in (("run_sql", run, run_spy),
                                           ("describe", describe, describe_spy))
               if getattr(m, attr, None) is original]
    for module, attr, spy in patched:
        setattr(module, attr, spy)
    try:
        yield ran, described
    finally:
        for module, attr, _ in patched:
            setattr(module, attr, run if attr == "run_sql" else describe)


def sizes(n: int) -> Sizes:
    with ivm.connect() as db:
        db.execute(TABLE)
        db.ingest("t", [{"k": i % 3, "x": i % 5} for i in range(20)])
        started = time.perf_counter()
        with spied() as (ran, described):
            db.execute(f"CREATE VIEW v AS {view_sql(n)}")
            create_sql, planned = sum(ran), sum(described)
        with spied() as (ran, _):
            db.ingest("t", [{"k": 1, "x": 2}, {"k": 0, "x": 4}])
            epoch_sql = sum(ran)
        seconds = time.perf_counter() - started
        circuit = db._views["v"].circuit  # noqa: SLF001 - the circuit the view runs
        return Sizes(create_sql, epoch_sql, planned, len(circuit.operators),
                     sum(1 for _ in circuit.traces()), seconds)


@pytest.fixture(scope="module")
def measured() -> dict[int, Sizes]:
    return {n: sizes(n) for n in (1, 5, 15, 30)}


@pytest.mark.parametrize("field", ["create_sql", "epoch_sql", "described", "operators",
                                   "traces"])
def test_cost_grows_linearly_with_the_number_of_subqueries(
    measured: dict[int, Sizes], field: str
) -> None:
    cost = {n: getattr(s, field) for n, s in measured.items()}
    # The cost of one more subquery from 15 to 30 is that from 5 to 15 (a quadratic cost
    # would double it, the chain of binary joins multiplied it by 2 per subquery).
    early = (cost[15] - cost[5]) / 10
    late = (cost[30] - cost[15]) / 15
    assert 0 < late <= 1.25 * early, cost
    # and the first subquery costs no more than a later one (no large fixed part hides
    # a growth): one subquery's view is at most a few subqueries' worth.
    assert cost[1] <= cost[5], cost


def test_time_grows_no_faster_than_the_number_of_subqueries(
    measured: dict[int, Sizes]
) -> None:
    seconds = {n: s.seconds for n, s in measured.items()}
    # Twice the subqueries, 15 -> 30: linear is 2x; allowed 4x (and half a second of
    # noise), where a quadratic cost would be 4x and the binary-join chain 2^15x.
    assert seconds[30] <= 4 * seconds[15] + 0.5, seconds
    assert seconds[15] <= 4.5 * seconds[5] + 0.5, seconds  # 3x the subqueries


def test_the_subqueries_share_one_product_under_one_join() -> None:
    with ivm.connect() as db:
        db.execute(TABLE)
        db.execute(f"CREATE VIEW v AS {view_sql(15)}")
        explained = db.explain("v")
        assert explained.count("Product of 15 inputs") == 1, explained
        assert explained.count("DeltaJoin") == 1, explained


VIEWS = {
    "five": view_sql(5),
    "nine_in_where": "SELECT k, x FROM t WHERE x >= (SELECT AVG(x) FROM t) AND "
                     "k <> (SELECT MIN(k) FROM t WHERE x > 2) AND "
                     f"x + {subquery(3)} > (SELECT COUNT(*) FROM t) - 5",
    "grouped": "SELECT k, COUNT(*) AS n, (SELECT MAX(x) FROM t WHERE k = 0) AS a, "
               "SUM(x) - (SELECT COUNT(*) FROM t WHERE x IS NULL) AS c FROM t GROUP BY k "
               "HAVING COUNT(*) > (SELECT COUNT(*) FROM t WHERE k = 1) - 2",
}


@RANDOM_CDC
@given(data=st.data())
def test_many_subqueries_stay_exact_under_random_cdc(data: st.DataObject) -> None:
    run_workload([TABLE], VIEWS, data, epochs=10, domains=DOMAINS)


@RANDOM_CDC
@given(data=st.data())
def test_many_subqueries_on_spark(data: st.DataObject, spark: Any,
                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-scalar-product")
    run_workload([TABLE], {"five": view_sql(5)}, data, epochs=3, domains=DOMAINS,
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
