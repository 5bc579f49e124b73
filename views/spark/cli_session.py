"""The SparkSession of the command line's ``--spark MASTER`` (``views.cli``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def spark_for_cli(master: str) -> Iterator[SparkSession]:
    """A SparkSession on ``master`` (``local[2]``, ``spark://host:7077``…) whose Python
    workers run this interpreter (where ivm is installed), stopped at the end; a session
    already active in this process (the command line called from Python) is used as it
    is and left running."""
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # read when workers start
    spark = (
        SparkSession.builder.master(master).appName("ivm")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()
