"""The session's memory limit, and failures for memory in the user's terms.

``ivm.connect(..., memory_limit=...)`` and the settable ``db.memory_limit`` give the
session a ``MemoryBudget`` (``ivm.storage.memory``: how the limit is shared between
DuckDB and the state ivm holds in memory). This module is what the session does with it:

* ``held_bytes``: what the session holds in memory between statements (arrangements,
  row indexes, the deltas kept for replays of ``ingest(..., epoch=N)``);
* ``check_batches`` before an epoch runs and ``check_changes`` before it commits: the
  memory that cannot spill (a batch's hashes and index entries; each view's change,
  fetched into Arrow once the epoch commits) must fit, else ``ResourceError`` naming the
  table or view, and nothing is applied; in Spark mode ``collecting`` checks the views'
  changes as they arrive on the driver, before each batch is kept;
* ``as_resource``: an error whose cause is DuckDB's ``OutOfMemoryException`` or Python's
  ``MemoryError`` (or, in Spark mode, a task's, which arrives as text) becomes a
  ``ResourceError`` saying which table or view ran out, during what, and the limit. The
  epoch's transaction has rolled back by then, Spark's partitions with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from ivm.errors import IvmError, ResourceError
from ivm.operators.base import SavedMemory
from ivm.storage.heap import return_freed_pages
from ivm.storage.memory import (
    APPLY_BYTES_PER_ROW,
    MemoryBudget,
    describe,
    rows_bytes,
    variable_bytes_sql,
    width,
)

if TYPE_CHECKING:
    from ivm.views.session import Session

MEASURE_SHARE = 64
"""A change whose lower-bound size passes 1/MEASURE_SHARE of the limit has its strings
measured (one statement); smaller ones are not worth a statement."""

APPLY_ADVICE = "nothing was applied: apply it in smaller batches, or raise memory_limit"
READ_ADVICE = "read less at a time, or raise memory_limit"

_PHASES = {
    "batches": "reading its batch",
    "checks": "checking its batch against the stored rows",
    "views": "computing the views' changes",
    "state appends": "appending the epoch's rows to the state",
    "commit": "committing",
}
_SPARK_MEMORY = re.compile(r"Out of Memory Error|OutOfMemory(?:Exception|Error)|\bMemoryError\b")
_DUCKDB_ADVICE = re.compile(r"\s*(?:Possible solutions:|Database is launched|See also).*", re.S)


def memory_limit_property() -> property:
    """``Session.memory_limit``: bytes the session may use (settable, as ``connect``'s)."""

    def get(session: Session) -> int:
        return session._budget.limit

    def set_(session: Session, limit: int | str) -> None:
        session._check_open()
        budget = MemoryBudget(limit)
        budget.held = session._budget.held
        session._budget = session._arrangements.budget = budget
        settle(session)  # within the new limit at once, not at the next epoch

    return property(get, set_, doc=(  # type: ignore[arg-type]
        "The memory the session may use, in bytes (DuckDB and the state ivm keeps in "
        "memory together): ivm.connect(..., memory_limit=) or its default, half of the "
        "machine's memory. Settable, in bytes or as '4GB'; past it an epoch fails with "
        "ivm.ResourceError and applies nothing. Both modes (in Spark mode: the driver's "
        "DuckDB and state, and each task's DuckDB when set explicitly)."))


def settle(session: Session) -> None:
    """Before an epoch or a DDL script: the state brought within its share (arrangements
    dropped, the largest first), then DuckDB given what it leaves."""
    session._arrangements.fit()
    session._budget.settle(session._con)


def held_bytes(session: Session) -> int:
    """The bytes the session's in-memory state holds now: arrangements, row indexes,
    the replay ledger and operators' own memory (an ASOF join's time indexes)."""
    arranged = session._arrangements.nbytes()
    indexes = sum(index.nbytes for index in session._row_indexes.values())
    operators = sum(memory_bytes(value) for entries in session._operator_memory.values()
                    for value in entries.values())
    return arranged + indexes + operators + session._ledger.nbytes()


def release_memory(session: Session) -> None:
    """At close: drop what the session holds in memory (arrangements, row indexes,
    operators' memory, the deltas kept for replays, this epoch's changes), so that a closed
    session holds none of it however long the object lives. A session sits in reference
    cycles (its engine, reads and indexes point back at it), which only Python's cyclic
    collector frees, at a full collection that may be many epochs away: the soak's
    closed sessions kept their arrangements (≈110 MB of Arrow) beside the next session's
    until one ran (``benchmarks/bench_soak.py``). Then glibc is asked to give the pages
    freed back to the system (``malloc_trim``, where the C library has it)."""
    session._arrangements.clear()
    session._row_indexes.clear()
    session._operator_memory.clear()
    session._ledger.forget()
    session._direct_changes = {}
    session._no_change = {}
    session.last_profile = None
    return_freed_pages()


def memory_bytes(value: Any) -> int:
    """The bytes an entry of an operator's memory holds: its arrays (``to_arrays``, or
    as a closed session saved them), or what it says of itself (``nbytes``)."""
    if isinstance(value, SavedMemory):
        return sum(a.nbytes for a in value.arrays.values())
    if hasattr(value, "to_arrays"):
        return sum(getattr(a, "nbytes", 0) for a in value.to_arrays().values())
    return int(getattr(value, "nbytes", 0))


def check_batches(session: Session, batches: Mapping[str, Any]) -> None:
    """ResourceError, before anything runs, unless an epoch's batches (Arrow) fit beside
    what the session holds: each batch, and ``APPLY_BYTES_PER_ROW`` bytes a row."""
    tables = [(name, b) for name, b in batches.items() if isinstance(b, pa.Table)]
    rows = sum(b.num_rows for _, b in tables)
    need = sum(b.nbytes for _, b in tables) + APPLY_BYTES_PER_ROW * rows
    if tables and rows:
        what = f"{_tables_text(n for n, _ in tables)}: the batch ({rows:,} rows)"
        session._budget.require(need, what)


def collecting(session: Session) -> Callable[[Mapping[str, tuple[int, int]]], None]:
    """Spark mode: the check of the views' changes as the epoch's job sends them to the
    driver, batch by batch (``ivm.execution.spark.collect``), told what has arrived of each
    view's change, (rows, bytes). ResourceError unless that fits beside what the driver
    holds, twice (as Arrow and as the DuckDB tables ingest returns them from), naming the
    view with the most: raised before the batch that would pass the limit is kept, so the
    driver stops reading there, and nothing is applied."""
    budget = session._budget
    held = budget.held()  # nothing the session holds changes until the epoch commits

    def check(received: Mapping[str, tuple[int, int]]) -> None:
        total = sum(nbytes for _, nbytes in received.values())
        if held + 2 * total <= budget.limit:
            return
        largest = max(received, key=lambda view: received[view][1])
        others = " with the other views' changes" if len(received) > 1 else ""
        raise ResourceError(
            f"view {largest!r}: its change in this epoch (the driver stopped reading it at "
            f"{received[largest][0]:,} rows), collected on the Spark driver{others}, "
            f"needs more than {describe(2 * total)} of memory, more than {budget.text()} "
            f"leaves ({describe(held)} of it held by arrangements and indexes): {APPLY_ADVICE}"
        )

    return check


def check_changes(session: Session, changed: Mapping[str, str]) -> None:
    """Inside the epoch's transaction: ResourceError unless every changed view's change
    (``changed``: their scratch tables) fits in memory when fetched after the commit,
    naming the view with the largest."""
    budget = session._budget
    sizes: dict[str, int] = {}
    for view, scratch in changed.items():
        columns = [(c.name, c.type) for c in session._views[view].schema.columns]
        rows = session._changed_rows.get(view, 0)
        sizes[view] = rows_bytes(rows, columns)
        if view in session._direct_changes:  # fetched already (views.direct_changes)
            sizes[view] = session._direct_changes[view].nbytes
        elif sizes[view] * MEASURE_SHARE > budget.limit:
            sizes[view] = _measured(session._con, scratch, rows, columns)
    if not sizes:
        return
    largest = max(sizes, key=sizes.__getitem__)
    total = sum(sizes.values())
    others = " with the other views' changes" if total > 1.1 * sizes[largest] else ""
    rows = session._changed_rows.get(largest, 0)
    budget.require(
        total, f"view {largest!r}: its change in this epoch ({rows:,} rows), which ingest "
        f"fetches to return it{others},",
    )


def _measured(con: duckdb.DuckDBPyConnection, scratch: str, rows: int,
              columns: list[tuple[str, str]]) -> int:
    """The Arrow bytes of a change's ``rows`` rows in ``scratch``, its strings measured."""
    fixed = rows * sum(width(t) or 8 for _, t in columns)
    variable = [(n, t) for n, t in columns if width(t) is None]
    if not variable:
        return fixed
    lengths = " + ".join(variable_bytes_sql(n, t) for n, t in variable)
    found = con.execute(f"SELECT {lengths} FROM {scratch}").fetchall()
    return fixed + int(found[0][0] or 0)


def memory_failure(error: BaseException | None) -> BaseException | None:
    """The ``OutOfMemoryException`` or ``MemoryError`` behind ``error``, if one is."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, duckdb.OutOfMemoryException | MemoryError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def as_resource(
    error: BaseException, subject: str, budget: MemoryBudget, advice: str = APPLY_ADVICE,
    text: str | None = None,
) -> ResourceError | None:
    """``error`` as the ResourceError it stands for (``subject``: what ran out, in the
    user's terms: ``"view 'v' ran out of memory computing its change"``), or None.
    ``text``: a failed Spark job's whole text, searched for a task's memory failure
    (which arrives as text: DuckDB's, Python's ``MemoryError``, the JVM's)."""
    if isinstance(error, ResourceError) and not _bare(error):
        return error
    cause = memory_failure(error)
    searched = text if text is not None else str(error) if isinstance(error, IvmError) else ""
    if cause is not None:
        detail = _words(cause)
    elif _SPARK_MEMORY.search(searched):
        detail = "a Spark task: " + _words(error)
    else:
        return None
    return ResourceError(f"{subject}: {detail} ({budget.text()}); {advice}")


def epoch_resource(session: Session, error: BaseException, subject: str) -> ResourceError | None:
    """``as_resource`` for an epoch's failure, unless the epoch committed before it (its
    number reached the session's): then it stands, and the failure is raised as it is."""
    if session.epoch == session._profile.epoch:
        return None
    return as_resource(error, subject, session._budget)


def ingest_subject(tables: Iterable[str], phase: str) -> str:
    """What ran out while an epoch applied ``tables``' batches, in ``phase`` (the last
    phase the epoch's profile opened)."""
    doing = _PHASES.get(phase, "applying its batch")
    return f"ingest into {_tables_text(tables)} ran out of memory {doing}"


def view_subject(view: str, filling: bool = False) -> str:
    """What ran out while ``view`` computed its change (``filling``: its first contents)."""
    doing = "filling it from the rows already there" if filling else "computing its change"
    return f"view {view!r} ran out of memory {doing}"


def task_subject(view: str | None, tables: Iterable[str]) -> str:
    """What ran out in a Spark task of ``view``'s stages (None: a table's stage)."""
    if view is not None:
        return f"view {view!r} ran out of memory in a partition's task computing its change"
    return f"ingest into {_tables_text(tables)} ran out of memory in a partition's task"


def _tables_text(names: Iterable[str]) -> str:
    listed = list(dict.fromkeys(names))
    if len(listed) == 1:
        return f"table {listed[0]!r}"
    return "tables " + ", ".join(repr(n) for n in listed)


def _bare(error: ResourceError) -> bool:
    """Whether ``error`` is a DuckDB failure not yet put in the user's terms."""
    return memory_failure(error.__cause__) is not None


def _words(error: BaseException) -> str:
    """What DuckDB (or Python) said, on one line, without its advice in DuckDB's terms."""
    if isinstance(error, MemoryError) and not str(error):
        return "Python could not allocate memory"
    text = _DUCKDB_ADVICE.sub("", str(error))
    text = re.sub(r"^.*?Out of Memory Error: ", "", " ".join(text.split()))
    return text if isinstance(error, MemoryError) else f"DuckDB: {text}"


__all__ = [
    "as_resource",
    "check_batches",
    "check_changes",
    "collecting",
    "epoch_resource",
    "held_bytes",
    "ingest_subject",
    "memory_failure",
    "memory_limit_property",
    "release_memory",
    "settle",
    "task_subject",
    "view_subject",
]
