"""TPC-H: the 22 queries (benchmarks/tpch_queries) as views, exact after every refresh batch.

Data is TPC-H at SF 0.01 from ``tpchgen-cli`` (generated for the module), the eight tables
with their primary keys; batches are ``tpch_refresh.Refresh``'s (the benchmark's): each
one ``ingest`` of RF1 (1 % of ORDERS as new orders with 1–7 lineitems each), RF2 (as
many live orders deleted with their lineitems) and updates of a few rows of ``part``,
``supplier``, ``customer`` and ``partsupp`` (non-key columns the queries filter, group
and order on; half of the parts and suppliers take values the queries name, half of the
rows updated are the last batch's, so rows enter the queries' filters and leave them).
All 22 views live in one session (embedded mode; a group of four in Spark mode), and
after the load and every batch the oracle harness checks each view against DuckDB
recomputing the query over a replica of the tables, its delta, and its plan as plain
SQL; the tables are checked against the replica too. Every view must change in some
batch (a view the workload never reaches would test little).

Where a LIMIT cuts through ties DuckDB's answer is arbitrary; ivm breaks ties by the
output columns in SELECT-list order, ascending, NULLS LAST, after the ORDER BY keys, so
the oracle computes ``tpch_workload.tie_broken(query)`` (those positions appended to the
outermost ORDER BY).

One test per mode runs the whole workload once and records, per query, its refusal or
the differences found; each query reports its own result as a subtest. (Not one test per
query over a shared fixture: under pytest-xdist both workers would run the workload, and
``--dist loadgroup``, which could keep them on one worker, silently stops grouping with
pytest 9.2: pytest-xdist issue #1386.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
import tpch_refresh
import tpch_workload as tpch
from oracle.harness import Harness
from oracle.spark import SPARK_PARTITIONS

import ivm

pytestmark = pytest.mark.xdist_group("tpch")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

QUERIES = tpch.queries()
SCALE = 0.01
BATCHES = 4
SEED = 7
FRACTION = 0.01
"""New and deleted orders per batch, as a fraction of ORDERS (the spec's RF is 0.1 %; at
SF 0.01 that is 15 orders, which leaves most views unchanged)."""
UPDATES = 20
"""Rows updated per batch in each of part (2,000 rows at SF 0.01), supplier (100), customer
(1,500) and partsupp (8,000)."""
SPARK_QUERIES = ("q18",)
"""Spark mode: IN with HAVING, a three-way join and an aggregate under a top-k (top-k,
LEFT JOINs and subqueries have their own Spark tests; each Spark epoch costs seconds)."""
SPARK_BATCHES = 1

@dataclass
class Outcome:
    """What happened to one query's view over the whole workload."""

    refused: ivm.UnsupportedSQL | None = None
    problems: list[str] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)
    """Rows of the view's delta, per batch."""

    def check(self) -> None:
        """Raise the refusal, or fail with the differences found, or if no batch changed
        the view."""
        if self.refused is not None:
            raise self.refused
        assert not self.problems, "\n\n".join(self.problems)
        # A view no batch changes tests little: the workload must reach every query.
        assert any(self.changed), f"no batch changed the view (delta rows: {self.changed})"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pa.Table]:
    folder = tmp_path_factory.mktemp("tpch") / f"sf{SCALE:g}"
    tpch.generate(SCALE, folder)
    return tpch.read_tables(folder)


def maintain(
    tables: dict[str, pa.Table],
    names: Iterable[str],
    batches: int,
    connect: Callable[[], Any],
) -> dict[str, Outcome]:
    """Load the tables, create a view per query, run the batches; check after each step.
    Only the tables the queries read are created, loaded and changed."""
    outcomes = {name: Outcome() for name in names}
    used = set().union(*(tpch.tables_of(QUERIES[name]) for name in outcomes))
    harness = Harness(tpch.ddl(only=used), connect=connect)
    load = {name: tpch_refresh.weighted(tables[name].slice(0, 0), tables[name]) for name in used}
    try:
        epoch(harness, load, outcomes, "after the load")
        for name, outcome in outcomes.items():
            sql = QUERIES[name]
            try:
                harness.create_views({name: sql}, oracle={name: tpch.tie_broken(sql)})
            except ivm.UnsupportedSQL as error:
                outcome.refused = error
            except Exception as error:  # noqa: BLE001 - reported by the query's test
                outcome.problems.append(f"CREATE VIEW {name}: {type(error).__name__}: {error}")
        refresh = tpch_refresh.Refresh(tables, seed=SEED, fraction=FRACTION, updates=UPDATES)
        for number in range(1, batches + 1):
            batch = refresh.next(also_delete=top_orders(harness, outcomes))
            changes = {name: change for name, change in batch.tables.items() if name in used}
            for name, delta in epoch(harness, changes, outcomes, f"after batch {number}").items():
                outcomes[name].changed.append(delta.num_rows)
            refresh.commit(batch)
    finally:
        harness.close()
    return outcomes


AT_THE_TOP = {"q03": "l_orderkey", "q18": "o_orderkey"}
"""LIMIT queries whose top rows random batches rarely reach: each batch also deletes the
order in the first row of each (a change inside the top n: the next row is promoted)."""


def top_orders(harness: Harness, names: Iterable[str]) -> list[int]:
    """The order keys in the first rows of the ``AT_THE_TOP`` queries among ``names``."""
    keys = []
    for name in set(AT_THE_TOP) & set(names):
        query = f"SELECT {AT_THE_TOP[name]} FROM ({tpch.tie_broken(QUERIES[name])}) LIMIT 1"
        rows = harness.oracle.execute(query).fetchall()  # fetched whole: DuckDB needs it
        keys += [int(r[0]) for r in rows]
    return sorted(keys)


def epoch(
    harness: Harness, batch: dict[str, pa.Table], outcomes: dict[str, Outcome], where: str
) -> dict[str, pa.Table]:
    """One ``ingest``, applied to the oracle too; then the tables, and each view's delta
    and contents, are checked (a view's differences are recorded in its outcome)."""
    deltas = ingest(harness, batch, outcomes, where)
    tpch_refresh.apply(harness.oracle, batch)
    harness.check_tables(where)
    for name in harness.views:
        try:
            read = harness.db.read(name)
            harness.check_delta(name, deltas[name], where, read)
            harness.check_view(name, where, read)
        except AssertionError as error:
            outcomes[name].problems.append(str(error))
    return deltas


def ingest(
    harness: Harness, batch: dict[str, pa.Table], outcomes: dict[str, Outcome], where: str
) -> dict[str, pa.Table]:
    """``ingest`` the batch; a view it fails on is recorded, dropped and the batch retried
    (a failed ingest changes nothing), so one query's error does not hide the others."""
    while True:
        try:
            return harness.db.ingest(batch)
        except ivm.ExecutionError as error:
            named = re.search(r"view '(\w+)'", str(error))
            if named is None or named[1] not in harness.views:
                raise
            outcomes[named[1]].problems.append(f"{where}: ingest failed: {error}")
            harness.drop_view(named[1])


def test_every_query_is_here() -> None:
    assert list(QUERIES) == [f"q{i:02d}" for i in range(1, 23)]


def test_tpch_queries(tables: dict[str, pa.Table], subtests: pytest.Subtests) -> None:
    report(maintain(tables, QUERIES, BATCHES, ivm.connect), subtests)


def test_tpch_queries_on_spark(
    tables: dict[str, pa.Table],
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    subtests: pytest.Subtests,
) -> None:
    directory = tmp_path_factory.mktemp("spark-tpch")
    outcomes = maintain(
        tables,
        SPARK_QUERIES,
        SPARK_BATCHES,
        lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS),
    )
    report(outcomes, subtests)


def report(outcomes: dict[str, Outcome], subtests: pytest.Subtests) -> None:
    """One subtest per query: passed, or failed with its differences (or refusal)."""
    for name, outcome in outcomes.items():
        with subtests.test(msg=name):
            outcome.check()
