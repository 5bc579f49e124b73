"""A progress bar on standard error for long DDL (a view's backfill) and long epochs.

DuckDB itself prints a bar on standard *output* for any statement past two seconds,
unlabelled, in the middle of a program's own output; ivm's connections keep DuckDB's
progress count but never print it (``ivm.storage.settings.QUIET_PROGRESS``), and
``shown`` draws ivm's own bar instead, with a label (``running DDL``, ``epoch 12``): a
thread polls what is running, DuckDB's ``query_progress()`` of the
statement in flight (embedded mode) or the Spark job's finished tasks of its active
stages (Spark mode, ``views.spark.progress``), and a rich bar shows it once the work
has taken ``DELAY`` seconds, so quick calls draw nothing. Each time the fraction falls
back (a next statement or stage started), the step count grows.

``progress=None`` (the default of ``execute`` and ``ingest``) shows it when standard
error is a terminal; ``True`` always (at once); ``False`` never.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import duckdb

from ivm.errors import IvmError

if TYPE_CHECKING:
    from ivm.views.session import Session

DELAY = 1.0
"""Seconds a call runs before its bar appears (``progress=None``)."""
POLL = 0.1
"""Seconds between two looks at what is running."""

Source = Callable[[], float | None]
"""What is done of the work running now, in percent (None: nothing measurable)."""


def checked(progress: object, call: str) -> bool | None:
    """``progress`` if it is True, False or None; else an IvmError naming ``call``."""
    if progress is not None and not isinstance(progress, bool):
        raise IvmError(f"{call}: progress= is True, False or None (when stderr is a "
                       f"terminal), not {progress!r}")
    return progress


@contextmanager
def shown(session: Session, label: str, progress: bool | None) -> Iterator[None]:
    """Within the block, a bar labelled ``label`` of the session's running work, drawn
    as ``progress`` says (see the module docstring)."""
    if progress is False or (progress is None and not sys.stderr.isatty()):
        yield
        return
    if session._engine.spark is not None:
        from ivm.views.spark.progress import stage_progress  # imports nothing of pyspark

        source = stage_progress(session._engine.spark)
    else:
        source = statement_progress(session._con)
    poller = Poller(label, source, 0.0 if progress else DELAY)
    poller.start()
    try:
        yield
    finally:
        poller.stop()


def statement_progress(con: duckdb.DuckDBPyConnection) -> Source:
    """DuckDB's percentage of the statement running on ``con`` (None between them)."""

    def done() -> float | None:
        value = con.query_progress()
        return value if value >= 0 else None

    return done


class Poller(threading.Thread):
    """A thread drawing ``source`` as a rich bar on standard error until ``stop``."""

    def __init__(self, label: str, source: Source, delay: float) -> None:
        super().__init__(name="ivm-progress", daemon=True)
        self.label, self.source, self.delay = label, source, delay
        self.finished = threading.Event()
        self.steps = 0

    def run(self) -> None:
        """Wait ``delay``, then redraw every ``POLL`` seconds until stopped."""
        if self.finished.wait(self.delay):
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]{task.fields[label]}"), BarColumn(),
            TextColumn("{task.percentage:>3.0f}% of step {task.fields[step]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )
        task = bar.add_task("work", total=100.0, label=self.label, step=1)
        last = 0.0
        with bar:
            while not self.finished.is_set():
                value = self._polled()
                if value is not None:
                    if value + 1.0 < last:  # fell back: the next statement or stage
                        self.steps += 1
                    last = value
                    bar.update(task, completed=value, step=self.steps + 1)
                self.finished.wait(POLL)
            bar.update(task, completed=100.0)

    def _polled(self) -> float | None:
        """The source's value; None when it cannot say (the work between statements, or
        a connection closing under it)."""
        try:
            return self.source()
        except Exception:  # noqa: BLE001 - a bar never fails the work it shows
            return None

    def stop(self) -> None:
        """End the bar (drawn whole) and wait for the thread."""
        self.finished.set()
        self.join()


__all__ = ["DELAY", "Poller", "checked", "shown", "statement_progress"]
