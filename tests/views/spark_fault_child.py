"""The child side of the Spark-mode kill -9 tests (``test_spark_faults``): a Spark driver
that dies mid-script.

``python spark_fault_child.py REQUEST`` (REQUEST: JSON ``{"state", "progress", "point",
"at", "pause"}``) starts a local Spark of its own (a driver killed -9 takes its JVM with
it, so the test session's Spark cannot serve), opens the Spark-mode state at ``state``
(epoch 1, made by the test), and runs ``script``, appending each finished step to the
progress file. Either ``point`` is armed on the driver (``ivm.faults``: the process kills
itself there), or ``pause`` (``{"stage", "marker"}``) makes the first task of that stage
in the first epoch sleep once it has written its partitions, its process id in
``<marker>/paused``, for the test to kill this whole process group (driver, JVM, Python
workers) as a machine that dies would. Exit 3: the script ended, never killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import fault_child
import pyarrow as pa
from soak_workload import DDL

import ivm
from ivm import faults

TABLES = ("customers", "orders")
"""The soak's tables the state holds: what ``by_region`` and the extra view read (each
table more is a stage more in every epoch)."""
TABLES_DDL = ";".join(s for s in DDL.split(";") if any(f"TABLE {t} " in s for t in TABLES))
"""The CREATE TABLE statements of ``TABLES``."""

STEPS: tuple[str, ...] = (
    "open", "epoch 2", "create", "epoch 3", "failed", "epoch 4", "drop", "closed",
)
"""What the script does, in order. ``epoch 3`` streams its batches (``RecordBatchReader``s,
spooled under the state). ``failed``: a batch of new orders whose view stage fails on
every attempt, having written (``FailurePoint``): the table's partitions and the view's
applied it, the ingest fails, and the driver rolls them back."""
STREAMED = "epoch 3"
FAILED = {"orders": [{"id": -i, "customer": i, "product": i % 5, "amount": 1, "ts": i}
                     for i in range(1, 13)]}
"""Twelve orders no epoch of the workload has: they land in every partition."""
PAUSE_SECONDS = 600.0
"""How long a paused task sleeps: longer than the test waits for it."""


def start_spark() -> object:
    """A local Spark for this driver alone: one core, one attempt per task."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[1]")
        .appName("ivm-fault-child")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "3")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.python.unix.domain.socket.enabled", "true")
        .getOrCreate()
    )


def batches_of(batches: dict, streamed: bool = False) -> dict:
    """The workload's epoch for the tables the state holds (as streams: ``streamed``)."""
    held = {name: batch for name, batch in batches.items() if name in TABLES}
    if streamed:
        return {name: pa.RecordBatchReader.from_batches(batch.schema, batch.to_batches())
                for name, batch in held.items()}
    return held


def script(spark: object, state: str, progress: str, pause: dict | None) -> None:
    """Open the state (at epoch 1), then the steps of ``STEPS``; each finished step is
    appended to ``progress``."""
    from ivm.execution.spark.tasks import FailurePoint

    done = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    note = lambda step: os.write(done, f"{step}\n".encode())  # noqa: E731
    drawn = fault_child.workload(1)
    db = ivm.connect(state, spark=spark)
    note("open")
    if pause is not None:
        db._failure = FailurePoint(stage=pause["stage"], attempts=None,
                                   marker=pause["marker"], pause=PAUSE_SECONDS)
    for step in STEPS[1:-1]:
        if step == "create":
            db.execute(f"CREATE VIEW extra AS {fault_child.EXTRA}")
        elif step == "drop":
            db.execute("DROP VIEW extra")
        elif step == "failed":
            db._failure = FailurePoint(stage="-by_region/", attempts=None)
            with contextlib.suppress(ivm.IvmError):
                db.ingest(FAILED)
            db._failure = None
        else:
            db.ingest(batches_of(drawn.next(), streamed=step == STREAMED))
        note(step)
    db.close()
    note("closed")


def main(request: dict) -> None:
    """Run one request (module docstring)."""
    spark = start_spark()
    if request.get("point"):
        faults.arm(request["point"], "kill", request.get("at", 1))
    try:
        script(spark, request["state"], request["progress"], request.get("pause"))
    except BaseException as error:  # noqa: BLE001 - the child reports and exits
        Path(request["progress"] + ".error").write_text(repr(error))
        os._exit(4)
    os._exit(3)  # not killed


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
