"""What an epoch's Spark tasks run (inside ``mapInArrow``): a stage applied to its
partitions (``stage_task.apply_partition``), linear operators between stages, a constant
leaf's rows; each labelled with the table or view it works for, so that a failing task
names its view and every task's seconds are counted.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.accumulators import Accumulator, AccumulatorParam

from ivm.execution.spark.refusals import Refusal, TaskRefused, is_refusal, refusal
from ivm.execution.spark.stage_task import Ticket, apply_partition, configure, constant_change
from ivm.execution.spark.stages import Stage
from ivm.execution.spark.wire import arrow_schema, conform, from_wire_sql, to_wire_sql
from ivm.operators.base import Operator
from ivm.schema import Schema
from ivm.storage.partitions import host_cursor

BUCKET = "__p"
"""Column of a stage's input holding the partition (bucket) each row belongs to."""


@dataclass(frozen=True)
class FailurePoint:
    """Test hook: tasks of the stages whose directory contains ``stage`` raise.

    ``after_write``: after applying their epoch (else before); ``attempts``: on these
    task attempt numbers only (None: on every attempt, so the job fails). With
    ``pause`` (seconds; needs ``marker``), the first selected task of the whole cluster
    sleeps instead of raising, its process id in ``<marker>/paused``: the window in
    which a test kills the worker running it.
    """

    stage: str
    after_write: bool = True
    attempts: tuple[int, ...] | None = (0,)
    marker: str | None = None  # a directory where each injected failure leaves a file
    pause: float = 0.0

    def raise_in(self, directory: str, attempt: int) -> None:
        """Raise InjectedFailure (leaving a marker file when asked), or pause."""
        where = "after" if self.after_write else "before"
        if self.pause and self.marker is not None:
            try:
                paused = os.open(Path(self.marker) / "paused", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return  # another task paused already
            os.write(paused, str(os.getpid()).encode())
            os.close(paused)
            time.sleep(self.pause)
            return
        if self.marker is not None:
            name = f"{uuid.uuid4().hex}-attempt{attempt}"
            (Path(self.marker) / name).write_text(directory)
        raise InjectedFailure(f"injected failure {where} writing {directory} (attempt {attempt})")


class InjectedFailure(RuntimeError):
    """Raised by a task a ``FailurePoint`` selects."""


StageKey = tuple[str, str]
"""(table or view, stage name): whose stage a task ran."""
StageCounts = tuple[float, int, int]
"""What a stage's tasks spent and emitted: (seconds, tasks, rows)."""


class TaskTimes(AccumulatorParam):
    """A Spark accumulator of (seconds, tasks, rows out) per stage of a table or view, by
    ``StageKey``: what its stage tasks spent and emitted (a retried task may count twice)."""

    def zero(self, value: dict[StageKey, StageCounts]) -> dict[StageKey, StageCounts]:
        return {}

    def addInPlace(
        self, value1: dict[StageKey, StageCounts], value2: dict[StageKey, StageCounts]
    ) -> dict[StageKey, StageCounts]:
        for key, (seconds, tasks, rows) in value2.items():
            old_seconds, old_tasks, old_rows = value1.get(key, (0.0, 0, 0))
            value1[key] = (old_seconds + seconds, old_tasks + tasks, old_rows + rows)
        return value1


@dataclass(frozen=True)
class TaskLabel:
    """Whose stage a task runs (a table's or a view's): a view is named in its errors, and
    each task adds its seconds and the rows it emitted to ``times``, under ``stage``. A
    task refusing the data records it in ``refusals`` (``ivm.execution.spark.refusals``)
    and ends, instead of failing: ``order`` is its stage's place in the epoch's plan."""

    relation: str
    view: bool
    times: Accumulator[dict[StageKey, StageCounts]] | None = None
    stage: str = ""
    refusals: Accumulator[list[Refusal]] | None = None
    order: int = 0

    def note(self) -> str:
        """The line a failing task adds to its exception (read back by ``failed_view``)."""
        return f"{_VIEW_NOTE} {json.dumps(self.relation)}"


_VIEW_NOTE = "ivm stage of view"
_VIEW_NOTE_LINE = re.compile(rf"^{_VIEW_NOTE} (\".*\")$", re.MULTILINE)


def failed_view(error: BaseException) -> str | None:
    """The view whose stage task raised ``error`` (a failed Spark job, or a refusal), if a
    task said so."""
    if isinstance(error, TaskRefused):
        return error.view
    match = _VIEW_NOTE_LINE.search(str(error))
    return json.loads(match[1]) if match else None


def labeled(
    label: TaskLabel | None,
    task: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Run ``task`` on ``batches`` as the task of ``label``'s table or view: a view's task
    names it in its errors; the task's seconds and the rows it emitted are added to
    ``label.times`` (one addition per task: negligible beside the task's round trip). A
    refusal of the data goes to ``label.refusals``, and the task ends: Spark would only
    retry it to meet the same refusal."""
    start, rows = time.perf_counter(), 0
    try:
        for batch in task(batches):
            rows += batch.num_rows
            yield batch
    except Exception as error:
        if label is not None and label.refusals is not None and is_refusal(error):
            view = label.relation if label.view else None
            label.refusals.add([refusal(error, label.order, view)])
            return
        if label is not None and label.view:
            error.add_note(label.note())
        raise
    if label is not None and label.times is not None:
        key = (label.relation, label.stage)
        label.times.add({key: (time.perf_counter() - start, 1, rows)})


def applied(
    stage: Stage,
    directory: str,
    ticket: Ticket,
    failure: FailurePoint | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Apply the epoch's rows of ``stage`` (a wide table, ``BUCKET`` naming each row's
    partition) to each partition they fall in; yields the partitions' output changes."""
    received = list(batches)
    if not received:
        return
    wide = pa.Table.from_batches(received)
    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    fail = (
        failure is not None
        and failure.stage in directory
        and (failure.attempts is None or attempt in failure.attempts)
    )
    if fail and failure is not None and not failure.after_write:
        failure.raise_in(directory, attempt)
    # The bucket travels with the rows: Spark's task and partition numbers change when
    # stages are chained (a union renumbers its inputs' partitions).
    for bucket in sorted(pc.unique(wide.column(BUCKET)).to_pylist()):
        rows = wide.filter(pc.equal(wide.column(BUCKET), bucket))
        yield from apply_partition(stage, Path(directory), bucket, ticket, rows).to_batches()
    if fail and failure is not None:
        failure.raise_in(directory, attempt)


def linear_task(
    sql: str, leaf: Schema, result: Schema, ticket: Ticket, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Linear operators (``sql`` over table ``__ivm_leaf``) on a change, as DuckDB SQL."""
    received = list(batches)
    if not received:
        return
    con = host_cursor()
    try:
        configure(con, ticket)
        con.register("__ivm_in", pa.Table.from_batches(received))
        con.execute(
            f"CREATE TEMP TABLE __ivm_leaf AS {from_wire_sql('SELECT * FROM __ivm_in', leaf)}"
        ).fetchall()
        table = con.sql(to_wire_sql(sql, result)).to_arrow_table()
    finally:
        con.close()
    yield from conform(table, arrow_schema(result)).to_batches()


def constant_task(
    op: Operator, ticket: Ticket, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The rows of constant leaf ``op`` (made by the one task of a one-row input)."""
    for _ in batches:  # one row: this task is the only one
        yield from constant_change(op, ticket).to_batches()
