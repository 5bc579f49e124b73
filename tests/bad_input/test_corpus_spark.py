"""The bad-input corpus in Spark mode: every batch, DDL and API case that applies to a
Spark-mode session raises the same error class with the same words, and changes nothing:
every table and view and the epoch (``unchanged.py``), and on disk every partition file
with its stored epoch, no file added or removed (``spark_state.py``). A good batch
applies after every 25th case run (one table's; every 50th, one of every table's, then
each view checked against DuckDB's recomputation), and after the corpus.

What does not apply here, and why:

* ``NOT_IN_SPARK``: the cases of ``docs``, a STRUCT column, which Spark mode refuses at
  CREATE TABLE (``wire_types``: Spark mode carries no STRUCT; the embedded corpus has
  them);
* the ``connect`` cases (setup ``none``): ``ivm.connect``'s own arguments, checked before
  any mode exists (the Spark-specific ones, ``partitions`` without ``spark`` and a
  ``spark`` that is not a session, are among them);
* the command line's (setup ``cli``): ``ivm run`` runs embedded unless it starts a Spark of
  its own (``views.spark.cli_session``), a local cluster per run; its arguments are read
  by the same code in both modes.

``SPARK_ONLY`` adds what only Spark mode has: Spark DataFrame batches (normalized on the
executors), a view's CAST failing in its partitions on a small value, and a recursive view
past the iteration limit in its backfill's task.

One Spark-mode session serves every case (its DDL and first epoch cost 15–30 s); the
unchanged check makes that safe, as in ``test_corpus.py``. ``make test`` runs ``SAMPLE``
(the first case of every entry point and error class, every ``EVERY``-th of the rest,
and ``ALWAYS``; never ``DEEP_ONLY``); the deep profile every case.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from oracle.spark import SPARK_PARTITIONS

import ivm
from bad_input import api_cases, batch_cases, ddl_cases
from bad_input.cases import DAY, Case, Fresh, event, execute, ingest
from bad_input.runner import check_error, invoke, params
from bad_input.spark_state import (
    SPARK_ROWS,
    SPARK_SHOP,
    SparkState,
    assert_spark_unchanged,
    capture_spark,
    spark_good_batch,
)
from bad_input.unchanged import assert_views_recompute

pytestmark = pytest.mark.xdist_group("bad_input_corpus_spark")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

NOT_IN_SPARK = {
    case: "table docs has a STRUCT column, which Spark mode refuses at CREATE TABLE"
    for case in ("struct-unknown-field", "struct-field-wrong-type", "list-into-struct",
                 "scalar-into-struct", "struct-missing-field", "struct-field-lossy",
                 "struct-duplicate-key")
}

ORDERS = "id {}, customer STRING, amount DECIMAL(12,2), qty INT, tags ARRAY<STRING>, day DATE"


def frame(rows: list[tuple[Any, ...]], id_type: str = "BIGINT") -> Fresh:
    """A Spark DataFrame of ``orders`` rows (made when the case runs, on the active Spark)."""
    def make() -> Any:
        from pyspark.sql import SparkSession
        spark = SparkSession.getActiveSession()
        assert spark is not None
        return spark.createDataFrame(rows, ORDERS.format(id_type))
    return Fresh(make)


def row(id_: Any, customer: str | None = "ann") -> tuple[Any, ...]:
    """An ``orders`` row as a tuple of ``ORDERS``' columns."""
    return (id_, customer, Decimal("1.00"), 1, ["t"], DAY)


S, C = ivm.SchemaError, ivm.ConstraintError
SPARK_ONLY = [
    ingest("spark-view-cast-fails-in-a-partition", "events", [event(4, s="x")],
           ivm.ExecutionError, "'coded'", "'x'"),
    ingest("spark-frame-lossy-key", "orders", frame([row(10.5)], "DOUBLE"), S, "'orders'",
           "'id'"),
    ingest("spark-frame-duplicate-of-held-row", "orders", frame([row(1)]), C, "'orders'",
           "'id': 1"),
    ingest("spark-frame-duplicate-within", "orders", frame([row(70), row(70)]), C, "'orders'",
           "70"),
    ingest("spark-frame-null-key", "orders", frame([row(None)]), C, "'orders'", "'id'"),
    ingest("spark-frame-null-not-null-column", "orders", frame([row(71, None)]), C,
           "'customer'"),
    execute("spark-recursion-past-the-iteration-limit",  # each iteration in one task
            "CREATE VIEW chain AS WITH RECURSIVE r(n) AS (SELECT k FROM events UNION ALL "
            "SELECT n + 1 FROM r WHERE n < 1100) SELECT n FROM r", ivm.IterationLimitError,
            "'chain'", "'r'", "iteration_limit"),
]

CORPUS: list[Case] = [
    *(c for c in [*batch_cases.CASES, *ddl_cases.CASES, *api_cases.CASES]
      if c.setup == "shop" and c.id not in NOT_IN_SPARK),
    *SPARK_ONLY,
]

EVERY = 12
ALWAYS = {
    "duplicate-of-held-row", "spark-view-cast-fails-in-a-partition", "spark-frame-null-key",
}
"""Refused only by an epoch's Spark job (a table's partition, a view's, a Spark DataFrame's
values on the executors), whose partitions must roll back."""


def entry(case: Case) -> tuple[str, str]:
    """A case's entry point and error class."""
    return case.call, case.error.__name__


DEEP_ONLY = {"spark-recursion-past-the-iteration-limit", "megabyte-string-fails-view-cast"}
"""Cases of many seconds (1,000 iterations in one task, a megabyte through Spark's
shuffles), in the deep profile only."""

FIRSTS = {entry(case): case.id for case in reversed(CORPUS) if case.id not in DEEP_ONLY}
SAMPLE = ({c.id for i, c in enumerate(CORPUS) if i % EVERY == 0 or c.xfail}
          | set(FIRSTS.values()) | ALWAYS) - DEEP_ONLY


def test_the_corpus_in_spark_mode() -> None:
    ids = [case.id for case in CORPUS]
    assert len(ids) == len(set(ids)) >= 250
    assert NOT_IN_SPARK.keys() <= {c.id for c in batch_cases.CASES}
    assert set(ids) >= ALWAYS
    assert {entry(c) for c in CORPUS if c.id in SAMPLE} == {
        entry(c) for c in CORPUS if c.id not in DEEP_ONLY}
    assert len(SAMPLE) < len(CORPUS) / 4


class Shop:
    """The module's Spark-mode shop session, made again after a case that failed."""

    def __init__(self, spark: Any, root: Any) -> None:
        self.spark, self.root, self.made = spark, root, itertools.count()
        self.db: Any = None
        self.state: SparkState | None = None

    def session(self) -> Any:
        if self.db is None:
            self.db = ivm.connect(self.root / f"state{next(self.made)}", spark=self.spark,
                                  partitions=SPARK_PARTITIONS)
            self.db.execute(SPARK_SHOP)
            self.db.ingest(SPARK_ROWS)
            self.state = None
        return self.db

    def drop(self) -> None:
        if self.db is not None:
            self.db.close()
        self.db, self.state = None, None


@pytest.fixture(scope="module")
def shop(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    made = Shop(spark, tmp_path_factory.mktemp("spark-corpus"))
    yield made
    made.drop()


_count = itertools.count(1)


def applies_good_batch(db: Any, n: int) -> None:
    """A good batch applies (one table's; every 50th, every table's, and then every view
    equals DuckDB's recomputation)."""
    epoch, batch = db.epoch, spark_good_batch(n)
    db.ingest(batch if n % 50 == 0 else dict([list(batch.items())[n % len(batch)]]))
    assert db.epoch == epoch + 1
    if n % 50 == 0:
        assert_views_recompute(db)


@pytest.mark.parametrize("case", params(CORPUS, SAMPLE))
def test_bad_input_on_spark(case: Case, shop: Shop) -> None:
    db = shop.session()
    try:
        before = shop.state or capture_spark(db)
        with pytest.raises(ivm.IvmError) as raised:
            invoke(db, case)
        check_error(case, raised.value)
        shop.state = assert_spark_unchanged(db, before)
        n = next(_count)
        if n % 25 == 0:
            applies_good_batch(db, n)
            shop.state = None
    except BaseException:
        shop.drop()  # the next case starts from a fresh session
        raise


def failed_tasks(context: Any, group: str) -> int:
    """How many tasks of the jobs of ``group`` failed (each job ran to its end)."""
    tracker = context.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
    assert jobs and all(job.status == "SUCCEEDED" for job in jobs), [j.status for j in jobs]
    stages = [tracker.getStageInfo(s) for job in jobs for s in job.stageIds]
    return sum(stage.numFailedTasks for stage in stages if stage is not None)


def test_a_refusal_in_a_partition_fails_no_task_and_leaves_no_file(shop: Shop) -> None:
    """A batch a partition refuses is refused by the tasks' first attempt: the job runs to
    its end, no task failed (Spark retried none; ``ivm.execution.spark.refusals``). The
    partitions the refused epoch made (those of a new table whose other rows applied) are
    removed again: no file is left."""
    db = shop.session()
    db.execute("CREATE TABLE fresh (k INTEGER PRIMARY KEY, s VARCHAR)")
    before = capture_spark(db)
    context = db.spark.sparkContext
    context.setJobGroup("ivm-refusal", "a refused batch")
    try:
        rows = [{"k": k, "s": str(k), "__w": 1} for k in range(30)]
        with pytest.raises(ivm.ConstraintError, match="'fresh'.*99"):
            db.ingest("fresh", [*rows, {"k": 99, "s": "x", "__w": -1}])
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert failed_tasks(context, "ivm-refusal") == 0
    assert_spark_unchanged(db, before)
    db.execute("DROP TABLE fresh")
    shop.state = None


def test_a_good_batch_applies_after_the_corpus(shop: Shop) -> None:
    applies_good_batch(shop.session(), 50 * (next(_count) + 1000))
