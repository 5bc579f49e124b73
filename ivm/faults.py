"""Fault points: named places in the code where a test makes the process die or an I/O
call fail, to check what a crash or a full disk there leaves behind.

The code calls ``reached(name)`` at each point (``POINTS`` lists them, by what runs
there). Nothing is armed outside tests, and then a call costs one test of an empty
dict. A test (usually in a child process it then lets die) arms a point::

    faults.arm("commit.before", "kill")             # SIGKILL at the first call
    faults.arm("trace.append", "kill", at=3)        # ... at the third
    faults.arm("snapshot.array", "enospc")          # OSError(ENOSPC) there instead

``kill`` is ``kill -9`` of the process itself: no ``finally`` block, ``atexit`` hook or
buffered write runs, as in a crash or an OOM kill. ``enospc`` raises
``OSError(errno.ENOSPC)`` ("No space left on device"), what a write to a full disk
raises. A point reached with a detail (``reached("operator", op.kind)``) fires for an
arming of the bare name or of ``name:detail``.

**Spark tasks.** A Spark task runs in a Python worker that the JVM starts, not in the
process that armed a point, so an arming there never reaches it. ``arm_tasks`` arms a
point in the tasks instead: the Spark driver ships ``for_tasks()`` inside every task's
``Ticket`` (its ``armed``, ``ivm.execution.spark.stage_task``), and each task ``adopt``s it
before it works (a worker reused for several tasks arms afresh for each, so ``at`` counts one
task's calls). ``once=`` names a file: the point fires only in the process that creates
it (``O_CREAT | O_EXCL``, its process id written in it), so of all the tasks and their
retries that share the path exactly one dies, and a test reads there that it did::

    faults.arm_tasks("task.committed", "kill", once=tmp_path / "killed")

Keep that file outside the state directory: nothing but state may be left there.
"""

from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass

POINTS: dict[str, str] = {
    # opening and DDL
    "open.connected": "the state file opened, before its catalog is read",
    "snapshot.taken": "at open, the saved indexes' manifest taken (removed)",
    "transaction.begun": "BEGIN ran (an epoch's or a DDL script's transaction)",
    "ddl.catalog": "a table or view entered in the stored catalog, before COMMIT",
    "ddl.traces": "a new view's traces created, before its backfill",
    "ddl.manifest": "a view's manifest (its traces) recorded, before COMMIT",
    "ddl.dropped": "a table or view removed from the stored catalog, before COMMIT",
    "ddl.altered": "an altered table's rows rewritten, before its views are planned again",
    # an epoch's batch checks
    "checks.consolidated": "a table's batch consolidated, its hashes about to be read",
    "checks.index": "a batch checked against the table's in-memory row index",
    "checks.rules": "a batch's keys and deletes checked in SQL (no row index)",
    # operator SQL
    "operator": "an operator's change about to be computed (detail: its kind)",
    "operator.sql": "one generated statement about to run",
    # trace appends, COMMIT and what follows it
    "trace.append": "rows about to be appended to a trace",
    "trace.appended": "rows appended to a trace (inside the transaction)",
    "commit.before": "COMMIT about to run (an epoch's: its stored epoch advanced)",
    "commit.after": "COMMIT done, before the after-commit actions",
    "commit.actions": "the after-commit actions done",
    "arrangement.merge": "an in-memory arrangement merging a batch into its levels",
    "row_index.applied": "a committed change applied to a table's row index",
    "time_index.update": "an ASOF join's time index computing its version after the epoch",
    # compaction
    "compaction.begin": "a trace's compaction begun (its transaction open)",
    "compaction.commit": "a compacted trace rewritten, its COMMIT about to run",
    # closing: the saved indexes (the snapshot)
    "snapshot.begin": "a snapshot's new directory made",
    "snapshot.array": "an array file of a snapshot about to be written",
    "snapshot.manifest": "a snapshot's manifest written, before the rename",
    "snapshot.renamed": "the snapshot renamed into place",
    # closing: the state file rewritten when its free blocks have grown
    "file.copy": "a sparse state file's copy attached, its COPY FROM DATABASE about to run",
    "file.copied": "the copy complete and detached, the state's connection still open",
    "file.flushed": "the connection closed and the copy flushed, before its rename",
    # Spark mode, on the driver
    "spark.epoch": "an epoch's ticket issued (the fence moved to it), before any task ran",
    "spark.collected": "the epoch's Spark job done (each partition it touched applied the "
    "epoch) and the views' changes on the driver, before the driver's transaction",
    "spark.backfilled": "a new view's stages filled on Spark (its partition files written), "
    "before its manifest is recorded",
    "spark.rolled_back": "a partition ahead of the committed epoch rolled back (after a failed "
    "ingest, or as a session opens)",
    # Spark mode, in a task (armed with ``arm_tasks``; detail: the stage's kind)
    "task.applied": "a partition's epoch applied in its transaction, before its COMMIT",
    "task.committed": "a partition's epoch committed, before the task returns its output",
}
"""Every fault point, by name: where it is."""

Arming = tuple[str, str, int, str | None]
"""What ``arm`` was told, as a task receives it: (name, action, at, once)."""


@dataclass
class _Armed:
    action: str
    at: int
    once: str | None = None
    calls: int = 0


_armed: dict[str, _Armed] = {}
_for_tasks: dict[str, Arming] = {}
ACTIONS = ("kill", "enospc")


def arm(name: str, action: str = "kill", at: int = 1, once: str | os.PathLike[str] | None = None
        ) -> None:
    """Make the ``at``-th call of point ``name`` (``name`` or ``name:detail``) do
    ``action`` (``kill`` or ``enospc``), in the process that creates file ``once`` when
    given (module docstring); a test hook."""
    if name.split(":")[0] not in POINTS:
        raise ValueError(f"unknown fault point {name!r}")
    if action not in ACTIONS:
        raise ValueError(f"unknown fault action {action!r}")
    _armed[name] = _Armed(action, at, os.fspath(once) if once is not None else None)


def arm_tasks(
    name: str, action: str = "kill", at: int = 1, once: str | os.PathLike[str] | None = None
) -> None:
    """Arm ``name`` as ``arm`` does, in every Spark task this process's sessions start from
    now on instead of here (module docstring); a test hook."""
    arm(name, action, at, once)  # checks the arguments
    del _armed[name]
    _for_tasks[name] = (name, action, at, os.fspath(once) if once is not None else None)


def for_tasks() -> tuple[Arming, ...]:
    """The armings a Spark driver ships to its tasks (none outside tests)."""
    return tuple(_for_tasks.values())


def adopt(armings: tuple[Arming, ...]) -> None:
    """In a Spark task: arm what the driver shipped (nothing when it shipped none)."""
    for name, action, at, once in armings:
        arm(name, action, at, once)


def disarm() -> None:
    """Disarm every point, here and for tasks."""
    _armed.clear()
    _for_tasks.clear()


def reached(name: str, detail: str = "") -> None:
    """The code reached fault point ``name``: free unless a test armed it."""
    if not _armed:
        return
    for armed in (_armed.get(name), _armed.get(f"{name}:{detail}") if detail else None):
        if armed is None:
            continue
        armed.calls += 1
        if armed.calls != armed.at or not _claimed(armed.once):
            continue
        if armed.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (injected at {name})")


def _claimed(once: str | None) -> bool:
    """True unless ``once`` names a file another process (or an earlier call) created."""
    if once is None:
        return True
    try:
        claim = os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(claim, str(os.getpid()).encode())
    os.close(claim)
    return True
