"""One Spark job per epoch (``ivm.execution.spark.epoch_job``): every table's and view's
stages in one plan, a change read by several stages run once, views' changes collected
together and equal to recomputation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.execution.spark.epoch_job import reading_order
from ivm.execution.spark.executor import bucket_salts

pytestmark = pytest.mark.xdist_group("epoch_job")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

VIEWS = {
    "per_customer": "SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders "
                    "GROUP BY customer",
    "regions": "SELECT c.region, SUM(o.amount) AS total FROM orders o "
               "JOIN customers c ON o.customer = c.id GROUP BY c.region",
    "large": "SELECT id, amount FROM orders WHERE amount > 5",
    "top_region": "SELECT MAX(total) AS top FROM regions",
    "big_customers": "SELECT customer FROM per_customer WHERE n > 3",  # its input carried
}


def _view(name: str, *sources: str) -> Any:
    return SimpleNamespace(name=name, sources=frozenset(sources))


def test_a_view_comes_after_the_views_it_reads() -> None:
    views = [_view("d", "b", "c"), _view("b", "a"), _view("a", "t"), _view("c", "t"),
             _view("e", "u")]
    assert [v.name for v in reading_order(views)] == ["a", "c", "e", "b", "d"]


@pytest.fixture(scope="module")
def db(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two tables and the five views, loaded (the tests below change disjoint rows)."""
    path = tmp_path_factory.mktemp("epoch_job") / "state"
    session = ivm.connect(path, spark=spark, partitions=SPARK_PARTITIONS)
    session.execute("CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR);"
                    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, amount INT)")
    for name, sql in VIEWS.items():
        session.execute(f"CREATE VIEW {name} AS {sql}")
    session.ingest({"customers": [{"id": c, "region": f"r{c % 2}"} for c in range(4)],
                    "orders": [{"id": i, "customer": i % 4, "amount": i} for i in range(8)]})
    yield session
    session.close()


def test_an_epoch_is_one_spark_job(db: Any, spark: Any) -> None:
    context = spark.sparkContext
    context.setJobGroup("ivm-one-job", "an epoch of two tables and five views")
    try:
        db.ingest({"orders": [{"id": 20, "customer": 1, "amount": 9}],
                   "customers": [{"id": 9, "region": "r9"}]})
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert len(context.statusTracker().getJobIdsForGroup("ivm-one-job")) == 1
    for name, sql in VIEWS.items():
        assert sorted(db.read(name).to_pylist(), key=repr) == sorted(
            db.sql(sql).to_pylist(), key=repr), name


def test_a_change_read_by_several_stages_is_computed_once(db: Any) -> None:
    db.ingest("orders", [{"id": i, "customer": i % 4, "amount": i} for i in range(30, 60)])
    times = db._engine.task_times.value  # (seconds, tasks, rows) by (relation, stage)

    def tasks(name: str) -> int:
        return sum(counts[1] for (relation, _), counts in times.items() if relation == name)

    # orders' change feeds three views, regions' change a view and the driver, and
    # per_customer's a view (through a filter its task applies: a carried input) and the
    # driver: each stage's tasks run once per partition, not once per reader.
    assert tasks("orders") == SPARK_PARTITIONS
    regions_stages = 2  # the join, then the aggregate storing the view
    assert tasks("regions") == regions_stages * SPARK_PARTITIONS
    assert tasks("per_customer") == SPARK_PARTITIONS


def test_a_failing_view_is_named_and_the_epoch_changes_nothing(spark: Any, tmp_path: Path) -> None:
    db = ivm.connect(tmp_path / "state", spark=spark, partitions=SPARK_PARTITIONS)
    try:
        db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, code VARCHAR);"
                   "CREATE VIEW total AS SELECT COUNT(*) AS n FROM t;"
                   "CREATE VIEW codes AS SELECT CAST(code AS INTEGER) AS c, COUNT(*) AS n "
                   "FROM t GROUP BY CAST(code AS INTEGER)")
        db.ingest("t", [{"id": 1, "code": "7"}])
        with pytest.raises(ivm.ExecutionError, match="^view 'codes': "):
            db.ingest("t", [{"id": 2, "code": "seven"}])
        assert db.epoch == 1
        assert db.read("total").to_pylist() == [{"n": 1}]
        assert db.read("codes").to_pylist() == [{"c": 7, "n": 1}]
    finally:
        db.close()


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 16])
def test_bucket_salts_land_in_their_partitions(spark: Any, partitions: int) -> None:
    salts = bucket_salts(partitions)
    rows = spark.createDataFrame([(s,) for s in salts], "salt bigint").selectExpr(
        f"pmod(hash(salt), {partitions}) AS b").collect()
    assert [r.b for r in rows] == list(range(partitions))
