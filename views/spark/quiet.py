"""Spark's console quiet while an epoch's tasks may fail on a rejected batch.

A batch ivm refuses (a NULL key, a lossy cast) fails inside a Spark task; ivm
raises the clean ``IvmError`` on the driver, but Spark's executor and task-set
loggers would first print the task's failure with its Java stack trace. While an
epoch's (or a backfill's) jobs run, those loggers are turned off, and set back after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ivm.execution.spark.refusals import TaskRefused

LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.scheduler.TaskSchedulerImpl",
)
"""The loggers that print a failed task's stack trace."""
KILLED_TASKS_REPORT = 0.5
"""Seconds the killed tasks of a failed job are given to report, still quietly."""


@contextmanager
def quiet_tasks(spark: Any) -> Iterator[None]:
    """Turn the ``LOGGERS`` off for the block (log4j 2, as Spark ships it)."""
    try:
        jvm = spark.sparkContext._jvm
        log4j = jvm.org.apache.logging.log4j
        configurator = log4j.core.config.Configurator
        saved = {name: log4j.LogManager.getLogger(name).getLevel() for name in LOGGERS}
        for name in LOGGERS:
            configurator.setLevel(name, log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - another logging setup: leave the console as it is
        yield
        return
    try:
        yield
    except BaseException as error:
        if not _ran_to_its_end(error):
            _settle(spark)  # the failed job's other tasks are being killed: let them end quietly
        raise
    finally:
        for name, level in saved.items():
            configurator.setLevel(name, level)


def _ran_to_its_end(error: BaseException) -> bool:
    """Whether ``error`` is (or was raised from) a refusal its tasks recorded in a job that
    ran to its end (``ivm.execution.spark.refusals``): no task was killed."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, TaskRefused):
            return seen.__cause__ is None
        seen = seen.__cause__
    return False


def _settle(spark: Any, seconds: float = 5.0) -> None:
    """Wait (up to ``seconds``) until Spark runs no stage, then a moment for the killed
    tasks' reports (they arrive after their stage is cancelled)."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + seconds
    while tracker.getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(KILLED_TASKS_REPORT)
