"""``connect``: open a session in the mode asked for, with that mode's engine.

Embedded mode (the default) gives the session an ``EmbeddedEngine``; ``spark=`` a
``SparkEngine`` (``views.spark.engine``, imported only then, so pyspark loads only
for Spark mode). Either way the caller holds one ``Session``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from ivm.errors import IvmError, StateError
from ivm.guard import guarded
from ivm.views.session import Session

PLAN_CHANGE_POLICIES = ("rebuild", "refuse")


@guarded
def connect(path: str | os.PathLike[str] | None = None, *, spark: Any = None,
            partitions: int | None = None, on_plan_change: str = "rebuild",
            iteration_limit: int | None = None,
            settings: Mapping[str, str] | None = None,
            memory_limit: int | str | None = None) -> Session:
    """Open a session (API.md): in memory, or persistent state in directory ``path``
    (``path/ivm.duckdb``, and the indexes a clean close saved beside it for the next open).

    With ``spark=`` (a SparkSession) the state is kept as DuckDB files per
    partition under ``path`` and every epoch runs on Spark (``ivm.views.spark``);
    ``partitions=`` fixes the partition count when the state is created.
    ``on_plan_change=`` says what happens when reopened state was computed for
    another plan (an upgrade of ivm changed how a view is planned): ``"rebuild"``
    (the default) rebuilds that view from its inputs with an ``ivm.IvmWarning``;
    ``"refuse"`` raises ``StateError`` naming the view. ``iteration_limit=`` (None:
    the default, 1000) bounds the iterations a recursive view may take in one epoch
    (``Session.iteration_limit``, settable later). ``settings={"TimeZone": "UTC"}``: the
    DuckDB settings new state records, applied at every open (``db.settings``).
    ``memory_limit=`` (bytes, or ``"4GB"``; default half of the machine's memory) bounds
    the memory the session uses, DuckDB's and ivm's own (``views.resources``): an epoch
    that would need more fails with ``ivm.ResourceError`` and applies nothing. In Spark
    mode it bounds each partition task's DuckDB too.
    """
    if on_plan_change not in PLAN_CHANGE_POLICIES:
        raise IvmError(f"on_plan_change must be 'rebuild' or 'refuse', not {on_plan_change!r}")
    if path is not None and not isinstance(path, str | os.PathLike):
        raise StateError(f"connect takes a path (a directory of state), not {path!r}")
    if spark is not None:
        from ivm.views.spark.engine import SparkEngine  # imports pyspark: only when asked

        engine = functools.partial(SparkEngine, spark=spark, partitions=partitions)
        session = Session(path, on_plan_change, settings, engine=engine,
                          memory_limit=memory_limit)
    elif partitions is not None:
        raise IvmError("partitions= applies to Spark mode only: pass spark= as well")
    else:
        session = Session(path, on_plan_change, settings, memory_limit=memory_limit)
    try:
        if iteration_limit is not None:
            session.iteration_limit = iteration_limit
    except BaseException:
        session.close()
        raise
    return session


__all__ = ["PLAN_CHANGE_POLICIES", "connect"]
