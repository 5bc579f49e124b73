"""Spark mode's source for ``views.progress``: the share of tasks finished in the Spark
job's active stages (Spark's status tracker), for the bar of a long epoch or backfill."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def stage_progress(spark: Any) -> Callable[[], float | None]:
    """The percentage of finished tasks over the stages ``spark`` is running now (None
    while none runs)."""
    tracker = spark.sparkContext.statusTracker()

    def done() -> float | None:
        stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
        stages = [s for s in stages if s is not None]
        total = sum(s.numTasks for s in stages)
        return 100.0 * sum(s.numCompletedTasks for s in stages) / total if total else None

    return done
