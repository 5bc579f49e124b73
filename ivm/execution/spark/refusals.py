"""A task's refusal of the data travels back as data, not as a task failure.

Spark retries a failed task (``spark.task.maxFailures``: 4 by default, and in the tests'
``local[2,4]``), each attempt in a fresh Python worker that imports ivm again. A batch a
partition refuses (a duplicate of a key it holds, a delete of a row it lacks, a view's
CAST failing on a value) fails the same way on every attempt: measured on ``local[2,4]``,
a refused one-row batch took 10–20 s against 1.7 s for a good one, all of it retries.

So a stage task that refuses its rows (``is_refusal``: a constraint, a schema, an
iteration limit, DuckDB objecting to a value) records the error in the epoch's
accumulator (``Refusals``) and ends without output; the job runs to its end (later
stages see part of the change, and whatever they write is rolled back with the rest),
and the driver raises ``TaskRefused`` after the action (``first_refusal``): the error of
the earliest stage in the plan, naming the view whose stage refused, if a view's did.
Every other failure (the machine, a lost executor, ivm's own bug) still fails the task,
which Spark retries.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from pyspark.accumulators import AccumulatorParam

from ivm import errors
from ivm.execution.failures import DATA_ERRORS


@dataclass(frozen=True)
class Refusal:
    """One task's refusal: where its stage lies in the epoch's plan (``order``: lower is
    upstream), the error's class name in ``ivm.errors`` and its message, and the view
    whose stage refused (None for a table's)."""

    order: int
    kind: str
    message: str
    view: str | None


class Refusals(AccumulatorParam):
    """A Spark accumulator of the epoch's refusals (a list, in no particular order)."""

    def zero(self, value: list[Refusal]) -> list[Refusal]:
        return []

    def addInPlace(self, value1: list[Refusal], value2: list[Refusal]) -> list[Refusal]:
        value1.extend(value2)
        return value1


REFUSING = (errors.ConstraintError, errors.SchemaError, errors.IterationLimitError)
"""ivm's errors that refuse the data, whichever attempt meets them."""


def is_refusal(error: BaseException) -> bool:
    """Whether ``error``, raised in a task, refuses the data (the same on every attempt):
    a constraint, schema or iteration limit, or DuckDB objecting to a value (raised as
    it is, or as the ``ExecutionError`` ivm made of it). Running out of memory, I/O and
    every other error are not: another attempt may succeed."""
    if isinstance(error, REFUSING):
        return True
    if isinstance(error, errors.ResourceError):
        return False
    cause = error.__cause__ if isinstance(error, errors.ExecutionError) else error
    return isinstance(cause, DATA_ERRORS)


def refusal(error: BaseException, order: int, view: str | None) -> Refusal:
    """What a task records of ``error`` (``is_refusal``); a DuckDB error is an
    ``ExecutionError`` as the driver would have called it."""
    if isinstance(error, errors.IvmError):
        return Refusal(order, type(error).__name__, str(error), view)
    assert isinstance(error, duckdb.Error)
    text = f"a Spark task failed: {type(error).__name__}: {str(error)[:2000]}"
    return Refusal(order, "ExecutionError", text, view)


class TaskRefused(Exception):  # noqa: N818 - not an error of ivm's: the carrier of one
    """Raised on the driver after an action whose tasks refused the data: ``error`` is
    the refusal as an ``IvmError``, ``view`` the view whose stage refused (if any)."""

    def __init__(self, error: errors.IvmError, view: str | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.view = view


def first_refusal(recorded: list[Refusal]) -> TaskRefused | None:
    """The refusal of the earliest stage (then the first message, for a fixed answer)."""
    if not recorded:
        return None
    first = min(recorded, key=lambda r: (r.order, r.message))
    kind = getattr(errors, first.kind, None)
    if not (isinstance(kind, type) and issubclass(kind, errors.IvmError)):
        kind = errors.ExecutionError  # pragma: no cover - a task records ivm's classes only
    return TaskRefused(kind(first.message), first.view)
