"""One Spark job per epoch: every changed table's stage and every affected view's stages
as one DataFrame plan, run by one action.

A Spark job has a cost of its own, whatever it computes: on ``local[2]`` about 30 ms to
schedule, 40–90 ms per stage that runs Python (a round trip to a Python worker), and the
driver's planning. An epoch that ran one job per view, and one more per table read twice,
paid that per view. Here the whole epoch is one plan:

* each changed table's stage feeds every view stage that reads it, and each view's
  change every view over it, lazily, inside the plan: no change comes back to the driver
  to be sent out again;
* a change read more than once (a table read by several views, a view read by others)
  passes through an exchange of its own, which Spark reuses for every reader (``share``);
* the views' changes come back to the driver in the one action, as one wide Arrow table:
  a tag column naming the view, then every view's wire columns (``v<k>_c<j>``, null in
  other views' rows), then the weight; a table no view reads contributes its row count,
  so its stage runs too. They arrive batch by batch (``ivm.execution.spark.collect``),
  each weighed before it is kept: ``admit`` is told what has arrived of each view's
  change and may refuse it (the driver's memory limit) before it is all there.

Spark runs independent stages of the plan at once, as it would independent jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from ivm.execution.spark.collect import collect_arrow
from ivm.execution.spark.executor import SparkEpoch, padded_columns, reads, share
from ivm.execution.spark.stages import Stage
from ivm.execution.spark.wire import arrow_schema, wire_types
from ivm.schema import WEIGHT, Schema

TAG = "__v"
"""Column of the collected table naming whose change a row is (the index of its view)."""

Received = dict[str, tuple[int, int]]
"""What has reached the driver of each view's change so far: (rows, bytes)."""


@dataclass(frozen=True)
class TableRun:
    """A table changed by the epoch: its stage, where its partitions live, its batch."""

    name: str
    stage: Stage
    directory: Path
    batch: DataFrame


@dataclass(frozen=True)
class ViewRun:
    """A view of the session: its stages and where its partitions live."""

    name: str
    stages: list[Stage]
    directory: Path
    schema: Schema
    sources: frozenset[str]


def run_epoch(
    epoch: SparkEpoch, tables: Sequence[TableRun], views: Sequence[ViewRun],
    admit: Callable[[Received], None] | None = None,
) -> dict[str, pa.Table]:
    """Apply the epoch's table batches and every view they affect, in one Spark job.

    Returns the change (wire columns, ``arrow_schema``) of every view the epoch ran, by
    name. ``admit`` is told, as each batch of them arrives and before it is kept, what
    has arrived of each view's change; what it raises stops the job and is raised.
    """
    changed = {t.name for t in tables}
    affected = []
    for view in reading_order(views):
        if view.sources & changed:
            affected.append(view)
            changed.add(view.name)
    readers = _readers(affected)
    for table in tables:
        shared = readers[table.name] > 1
        change = epoch.run_stage(table.stage, table.directory / table.stage.name,
                                 [table.batch], shared, owner=(table.name, False))
        if change is not None:
            epoch.changes[table.name] = change
    outputs: dict[str, DataFrame] = {}
    for view in affected:
        change = epoch.run_view(view.directory, view.stages, view.name)
        if change is None:
            continue
        if readers[view.name]:  # read by views over it, and collected
            change = share(change, epoch.partitions)
        epoch.changes[view.name] = change
        outputs[view.name] = change
    unread = [t.name for t in tables if not readers[t.name] and t.name in epoch.changes]
    ran = [v for v in affected if v.name in outputs]
    return _collect(epoch, ran, outputs, unread, admit)


def reading_order(views: Sequence[ViewRun]) -> list[ViewRun]:
    """``views`` with each after every view it reads (otherwise in the order given)."""
    pending, ordered = list(views), []
    while pending:
        waiting = {v.name for v in pending}
        ready = [v for v in pending if not v.sources & waiting]
        if not ready:  # pragma: no cover - the catalog refuses cycles
            raise ValueError(f"views read each other: {sorted(waiting)}")
        ordered.extend(ready)
        pending = [v for v in pending if v.sources & waiting]
    return ordered


def _readers(views: Sequence[ViewRun]) -> Counter[str]:
    """How many stage inputs of ``views`` read each table's or view's change."""
    counts: Counter[str] = Counter()
    for view in views:
        counts.update(reads(view.stages)[1])
    return counts


def _collect(
    epoch: SparkEpoch, views: list[ViewRun], outputs: dict[str, DataFrame], unread: list[str],
    admit: Callable[[Received], None] | None,
) -> dict[str, pa.Table]:
    """Run the epoch's one job: each view's change, tagged, in one action; each table
    that no view reads counted (so that its stage runs)."""
    wires = [wire_types(v.schema, f"view {v.name}") for v in views]
    parts = []
    for k, view in enumerate(views):
        columns = [f"CAST({k} AS INT) AS {TAG}", *padded_columns(wires, k, "v"), WEIGHT]
        parts.append(outputs[view.name].selectExpr(*columns))
    for table in unread:
        nulls = padded_columns(wires, None, "v")
        counted = epoch.changes[table].groupBy().count()
        parts.append(counted.selectExpr(f"CAST(-1 AS INT) AS {TAG}", *nulls,
                                        f"CAST(count AS BIGINT) AS {WEIGHT}"))
    if not parts:
        return {}
    frame = reduce(DataFrame.unionAll, parts)
    collected = epoch.act(lambda: collect_arrow(frame, _weighed(views, admit)))
    changes = {}
    for k, view in enumerate(views):
        rows = collected.filter(pc.equal(collected.column(TAG), k))
        names = [f"v{k}_c{j}" for j in range(len(wires[k]))]
        schema = arrow_schema(view.schema)
        changes[view.name] = rows.select([*names, WEIGHT]).rename_columns(schema.names).cast(schema)
    return changes


def _weighed(
    views: list[ViewRun], admit: Callable[[Received], None] | None
) -> Callable[[pa.RecordBatch], None]:
    """What ``collect_arrow`` calls with each batch: the batch's rows and bytes added to
    their views' (a batch's bytes shared out by rows), then ``admit`` told the totals."""
    received: Received = {}

    def weigh(batch: pa.RecordBatch) -> None:
        if admit is None or not batch.num_rows:
            return
        for count in pc.value_counts(batch.column(TAG)).to_pylist():
            tag, rows = count["values"], count["counts"]
            if tag < 0:  # a table's row count, not a change
                continue
            name = views[tag].name
            had_rows, had_bytes = received.get(name, (0, 0))
            received[name] = (had_rows + rows, had_bytes + batch.nbytes * rows // batch.num_rows)
        admit(received)

    return weigh
