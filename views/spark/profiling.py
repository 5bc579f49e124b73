"""What an epoch's Spark tasks tell the profile: each stage's seconds, tasks and rows out
(``ivm.execution.spark.tasks.TaskTimes``), recorded under the view operator the stage
computes, so ``explain(analyze=True)`` shows them on that operator's line; each table's and
view's seconds (its stages' together) and the rows of its change, for ``db.stats()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ivm.execution.profile import OUTPUT, OperatorStats
from ivm.execution.spark.tasks import StageCounts, StageKey

if TYPE_CHECKING:
    from ivm.views.session import Session


def record_stages(
    session: Session, times: dict[StageKey, StageCounts], collected: dict[str, pa.Table]
) -> None:
    """Into the epoch's profile: each stage's counts (``times``, the tasks' accumulator)
    and each changed view's change rows (``collected``, its change on the driver)."""
    profile = session._profile
    for (relation, stage), (seconds, tasks, rows) in times.items():
        if relation in session._tables:
            profile.tables[relation] = profile.tables.get(relation, 0.0) + seconds
            profile.rows[relation] = profile.rows.get(relation, 0) + rows
        elif relation in collected:
            profile.views[relation] = profile.views.get(relation, 0.0) + seconds
            fingerprint = _operator_of(session, relation, stage)
            if fingerprint is not None:
                profile.operators[(relation, fingerprint)] = OperatorStats(tasks, seconds, rows)
    for view, change in collected.items():
        profile.views.setdefault(view, 0.0)
        profile.rows[view] = change.num_rows
        last = session._engine.stages_of(view)[-1].name  # the stage storing the view
        seconds, _, rows = times.get((view, last), (0.0, 0, change.num_rows))
        profile.operators[(view, OUTPUT)] = OperatorStats(1, seconds, rows)


def _operator_of(session: Session, view: str, stage: str) -> str | None:
    """The fingerprint of the view's operator that ``stage`` computes (a stage is named
    ``<kind>-<the first digits of its operator's fingerprint>``; an output stage's is the
    view's output)."""
    digits = stage.rsplit("-", 1)[-1]
    for op in session._views[view].circuit.operators:
        if op.fingerprint.startswith(digits):
            return op.fingerprint
    return None
