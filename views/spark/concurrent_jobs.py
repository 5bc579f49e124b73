"""Spark jobs of one epoch that do not depend on each other, run at once.

A Spark job is mostly latency (scheduling, a shuffle, starting Python work), so an
epoch submits its independent jobs together, each from its own driver thread: first the
tables' stages whose change is read more than once, then the views in *waves*, a view's
wave starting once every view it reads has its change.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from ivm.execution.spark.executor import SparkEpoch
from ivm.execution.spark.stages import Stage
from ivm.views.definitions import ViewDef

MAX_CONCURRENT_JOBS = 8
"""At most this many jobs of one epoch run at once (one driver thread each)."""

T = TypeVar("T")


def at_once(jobs: Sequence[Callable[[], T]]) -> list[T | BaseException]:
    """Run ``jobs`` together; each one's result or exception, in order."""
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=min(len(jobs), MAX_CONCURRENT_JOBS)) as pool:
        futures = [pool.submit(job) for job in jobs]
        return [future.exception() or future.result() for future in futures]


def waves(views: Sequence[ViewDef]) -> Iterator[list[ViewDef]]:
    """``views`` (in creation order) in waves: each view after every view it reads."""
    pending = list(views)
    while pending:
        waiting = {v.name for v in pending}
        yield [v for v in pending if not v.sources & waiting]
        pending = [v for v in pending if v.sources & waiting]


def view_job(
    epoch: SparkEpoch, directory: Path, stages: list[Stage]
) -> Callable[[], tuple[pa.Table, float] | None]:
    """A view's job for the epoch: its change (None: none) and the job's seconds."""

    def run() -> tuple[pa.Table, float] | None:
        change = epoch.run_view(directory, stages)
        if change is None:
            return None
        start = time.perf_counter()
        collected = change.toArrow()  # the job that runs the view's stages
        return collected, time.perf_counter() - start

    return run
