"""``ivm.execution.spark.collect``: a job's rows read batch by batch, each weighed before it
is kept, the read stopped (and the job cancelled) when the weighing refuses."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException

from ivm.execution.spark.collect import collect_arrow

ROWS = 100_000


class Refused(Exception):
    """What the test's ``admit`` raises."""


def numbers(spark: Any) -> Any:
    """``ROWS`` rows in four partitions (Arrow batches of at most 10,000 rows each)."""
    return spark.range(0, ROWS, numPartitions=4).selectExpr("id", "CAST(id * 2 AS INT) AS twice")


def test_every_row_arrives_with_the_frames_types(spark: Any) -> None:
    seen: list[int] = []
    table = collect_arrow(numbers(spark), lambda batch: seen.append(batch.num_rows))
    assert sum(seen) == table.num_rows == ROWS and len(seen) >= 10
    assert table.schema.names == ["id", "twice"]
    assert table.schema.types == [pa.int64(), pa.int32()]
    assert sorted(table.column("id").to_pylist()) == list(range(ROWS))
    empty = collect_arrow(numbers(spark).where("id < 0"), lambda batch: None)
    assert empty.num_rows == 0 and empty.schema.names == ["id", "twice"]


def test_a_refusal_stops_the_read_and_cancels_the_job(spark: Any) -> None:
    # The last partition takes seconds longer than the others (two run at once on
    # local[2]), then fails: a refusal made as the rows arrive comes while the job still
    # runs, and the job's failure never surfaces; one made after reading them all would
    # see the job ended.
    tracker = spark.sparkContext.statusTracker()
    kept: list[int] = []
    running: list[list[int]] = []

    def admit(batch: pa.RecordBatch) -> None:
        if len(kept) == 3:
            running.append(tracker.getActiveJobsIds())
            raise Refused("enough")
        kept.append(batch.num_rows)

    late = numbers(spark).selectExpr(
        "id", "IF(id = 99999, reflect('java.lang.Thread', 'sleep', CAST(8000 AS BIGINT)) "
        "|| raise_error('read too far'), twice) AS twice")
    with pytest.raises(Refused, match="enough"):
        collect_arrow(late, admit)
    assert len(kept) == 3 and running[0], running  # refused mid-job, the rest never read
    deadline = time.monotonic() + 60  # not a timing check: a job left hanging never ends
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not tracker.getActiveJobsIds()  # the job ended (cancelled), none left waiting
    assert collect_arrow(numbers(spark), lambda batch: None).num_rows == ROWS


def test_a_failing_job_raises_as_to_arrow_does(spark: Any) -> None:
    failing = numbers(spark).selectExpr("IF(id = 77777, raise_error('boom 77777'), id) AS id")
    with pytest.raises(PySparkException, match="boom 77777") as raised:
        collect_arrow(failing, lambda batch: None)
    with pytest.raises(PySparkException, match="boom 77777") as expected:
        failing.toArrow()
    assert type(raised.value) is type(expected.value)
