"""The child of the streaming kill test (``test_streaming``): a Structured Streaming query
``foreachBatch(db.sink("orders"))`` in Spark mode over the event files of a folder.

    python stream_child.py FOLDER [POINT AT]

It opens (or makes) the state ``FOLDER/state`` on a ``local[1]`` Spark, runs the query
over ``FOLDER/events`` with checkpoint ``FOLDER/checkpoint`` until no file is left
(``availableNow``), each file a micro-batch, and appends ``start <batch id> <epoch>``
to ``FOLDER/progress`` before each batch and ``applied <batch id> <epoch>`` after it.
With ``POINT AT`` the fault point ``POINT`` is armed (after the DDL) to SIGKILL the
process at its ``AT``-th call: mid-stream.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from streaming_debezium import DDL, EVENTS_SCHEMA

import ivm
from ivm import faults


def main(folder: Path, point: str | None, at: int) -> None:
    """Run the query to its end (or to the armed kill)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[1]").appName("ivm-stream-child")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    db = ivm.connect(folder / "state", spark=spark, partitions=2)
    if "orders" not in db.tables:
        db.execute(DDL)
    if point is not None:
        faults.arm(point, "kill", at=at)
    sink = db.sink("orders")
    progress = os.open(folder / "progress", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def apply(frame: Any, batch_id: int) -> None:
        os.write(progress, f"start {batch_id} {db.epoch}\n".encode())
        sink(frame, batch_id)
        os.write(progress, f"applied {batch_id} {db.epoch}\n".encode())

    query = (
        spark.readStream.schema(EVENTS_SCHEMA).option("maxFilesPerTrigger", 1)
        .json(str(folder / "events"))
        .writeStream.foreachBatch(apply)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    db.close()
    spark.stop()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(Path(arguments[0]), arguments[1] if len(arguments) > 1 else None,
         int(arguments[2]) if len(arguments) > 2 else 1)
