"""Loads larger than memory, with progress: a batch streamed in chunks within one epoch.

``ingest(table, reader)`` with a ``pyarrow.RecordBatchReader`` or a DuckDB relation
(read as a stream of record batches) applies the rows chunk by chunk, each chunk
through every view as the next part of one epoch, all in the epoch's single
transaction: the epoch commits whole or not at all, and only one chunk is held in
memory at a time (besides the views' changes, which the epoch returns). The views'
changes of the chunks are summed into the epoch's delta. A chunk holds at most
``CHUNK_ROWS`` rows, fewer when the session's memory limit leaves room for fewer
(``chunk_rows``), and each is checked against the limit as a batch is
(``views.resources``), the summed changes too before the epoch commits. What the session keeps in
memory (arrangements, row indexes, operators' memory) follows each chunk, and is
dropped whole if the epoch rolls back. Chunks apply in order,
so a chunk may delete or upsert rows an earlier chunk inserted; ``sequence=`` orders
versions within a chunk.

``progress=True`` shows a progress bar (``rich``) of the rows applied, on standard
error; ``None`` (the default) shows it when standard error is a terminal and the
load is streamed. A large in-memory table is streamed in chunks when ``progress=True``.

In Spark mode a reader or relation is spooled to files chunk by chunk and applied as one
Spark batch (``views.spark.spool``).
"""

from __future__ import annotations

import functools
import itertools
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from ivm.errors import ExecutionError, IvmError, SchemaError
from ivm.execution.profile import EpochProfile
from ivm.plan.sql import W, column_list, consolidate_sql
from ivm.schema import quote
from ivm.storage.memory import APPLY_BYTES_PER_ROW, rows_bytes
from ivm.views.diagnose import ViewFailed
from ivm.views.modes import spark_mode
from ivm.views.resources import (
    as_resource,
    check_batches,
    check_changes,
    epoch_resource,
    ingest_subject,
    view_subject,
)
from ivm.views.transaction import run_all

if TYPE_CHECKING:
    from ivm.views.session import Session

CHUNK_ROWS = 1_000_000
"""Rows per chunk of a large in-memory table streamed for its progress bar (at most)."""
MIN_CHUNK_ROWS = 1_000
"""The fewest rows a chunk holds, however little memory the limit leaves."""


def streamed(session: Session, table: Any, batch: Any, progress: bool | None) -> bool:
    """Whether this ingest streams its batch in chunks (embedded mode, one table)."""
    if isinstance(table, Mapping) or spark_mode(session):
        return False
    if isinstance(batch, pa.RecordBatchReader | duckdb.DuckDBPyRelation):
        return True
    return progress is True and isinstance(batch, pa.Table) and batch.num_rows > CHUNK_ROWS


def load_stream(
    session: Session, table: str, batch: Any, mode: str, sequence: str | None,
    progress: bool | None, forced: bool = False,
) -> dict[str, pa.Table]:
    """Apply the streamed batch as one epoch (see the module docstring); ``forced``:
    even if it has no rows (``ingest(..., epoch=N)``)."""
    session._check_open()
    name = session._ingestible(table)
    reader, total = reader_of(batch)
    chunks = table_chunks(reader, f"table {name!r}", chunk_rows(session, name))
    first = next(chunks)
    if first.num_rows == 0 and not forced:
        return session._unchanged()  # an empty batch is a no-op (API: ingest)
    show = progress if progress is not None else sys.stderr.isatty()
    profile = session._profile = EpochProfile(session.epoch + 1)
    sums: dict[str, str] = {}
    try:
        with session._transaction(ExecutionError), _bar(show, name, total) as advance:
            session._on_rollback.append(functools.partial(_forget_memory, session))
            for chunk in itertools.chain([first], chunks):
                with profile.phase("batches"):
                    changes = session._prepared(name, chunk, mode, sequence)
                    check_batches(session, changes)
                try:
                    changed = session._apply(changes, upsert=mode == "upsert")
                finally:
                    session._unregister_batches()
                _add_up(session, sums, changed)
                # What the epoch keeps in memory follows each chunk (the next reads
                # it); a roll-back forgets all of it (_forget_memory).
                actions, session._on_commit = session._on_commit, []
                run_all(actions)
                advance(chunk.num_rows)
            changed = _summed(session, sums)
            check_changes(session, changed)
            session._advance_epoch(changed)
    except ViewFailed as failure:
        resource = as_resource(failure.error, view_subject(failure.view.name), session._budget)
        raise resource or failure.error from failure.error.__cause__
    except (IvmError, MemoryError) as error:
        phase = next(reversed(profile.phases), "")
        resource = epoch_resource(session, error, ingest_subject([name], phase))
        if resource is None or resource is error:
            raise
        raise resource from error
    return session._finish_epoch(profile, changed)


def chunk_rows(session: Session, table: str) -> int:
    """Rows a chunk of a load into ``table`` may hold: ``CHUNK_ROWS``, or as many as a
    quarter of the room the session's memory limit leaves takes (a row counted at its
    fixed-width bytes, 8 for each other value, and what applying it needs), at least
    ``MIN_CHUNK_ROWS``."""
    budget = session._budget
    columns = [(c.name, c.type) for c in session._tables[table].schema.columns]
    per_row = rows_bytes(1, columns) + APPLY_BYTES_PER_ROW
    room = max(budget.limit - budget.held(), 0) // 4
    return max(min(MIN_CHUNK_ROWS, CHUNK_ROWS), min(CHUNK_ROWS, room // per_row))


def _forget_memory(session: Session) -> None:
    """A streamed load rolled back: what memory held of its chunks is dropped (it is
    built again from the state when next needed)."""
    session._after_unexpected()
    session._arrangements.clear()


def _add_up(session: Session, sums: dict[str, str], changed: dict[str, str]) -> None:
    """Add each view's change of one chunk to the epoch's running sum."""
    for view, scratch in changed.items():
        target = quote(f"__ivm_load_{view}")
        if view not in sums:
            session._con.execute(
                f"CREATE OR REPLACE TEMP TABLE {target} AS SELECT * FROM {scratch}"
            ).fetchall()
            sums[view] = target
        else:
            session._con.execute(f"INSERT INTO {target} SELECT * FROM {scratch}").fetchall()


def _summed(session: Session, sums: dict[str, str]) -> dict[str, str]:
    """Each view's summed change, consolidated (views whose chunks cancel out drop)."""
    changed = {}
    for view, target in sums.items():
        names = session._views[view].schema.names
        session._con.execute(
            f"CREATE OR REPLACE TEMP TABLE {target} AS "
            f"{consolidate_sql(f'SELECT {column_list(names)}, {W} FROM {target}', names)}"
        ).fetchall()
        if session._con.execute(f"SELECT 1 FROM {target} LIMIT 1").fetchall():
            changed[view] = target
    return changed


def reader_of(batch: Any) -> tuple[pa.RecordBatchReader, int | None]:
    """The batch as a reader of record batches, and its rows when known."""
    if isinstance(batch, pa.RecordBatchReader):
        return batch, None
    if isinstance(batch, duckdb.DuckDBPyRelation):
        return batch.to_arrow_reader(CHUNK_ROWS), None
    if isinstance(batch, pa.Table):
        return pa.RecordBatchReader.from_batches(
            batch.schema, batch.to_batches(max_chunksize=CHUNK_ROWS)
        ), batch.num_rows
    raise IvmError(f"cannot stream a {type(batch).__name__}")


def table_chunks(
    reader: pa.RecordBatchReader, context: str, size: int = CHUNK_ROWS
) -> Iterator[pa.Table]:
    """The reader's rows as tables of about ``size`` rows (small batches gathered, large
    ones sliced)."""
    pending: list[pa.RecordBatch] = []
    rows, chunks = 0, 0
    for number, whole in enumerate(reader):
        if not whole.schema.equals(reader.schema):
            raise SchemaError(
                f"{context}: record batch {number} of the reader has columns "
                f"({_fields(whole.schema)}) unlike the reader's own ({_fields(reader.schema)})"
            )
        for start in range(0, max(whole.num_rows, 1), size):
            batch = whole.slice(start, size)
            pending.append(batch)
            rows += batch.num_rows
            if rows >= size:
                yield pa.Table.from_batches(pending, reader.schema)
                pending, rows, chunks = [], 0, chunks + 1
    if rows or not chunks:  # the rest, or one empty chunk for an empty stream
        yield pa.Table.from_batches(pending, reader.schema)


def _fields(schema: pa.Schema) -> str:
    """A schema on one line: ``name type, …``."""
    return ", ".join(f"{field.name} {field.type}" for field in schema)


def _bar(show: bool, table: str, total: int | None) -> Any:
    """A context giving ``advance(rows)``: a rich progress bar on stderr, or nothing."""
    if not show:
        return nullcontext(lambda rows: None)
    return _Progress(table, total)


class _Progress:
    """A rich progress bar of the rows loaded into ``table``."""

    def __init__(self, table: str, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]loading {task.fields[table]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("rows"), TimeElapsedColumn(), console=Console(stderr=True),
        )
        self.task = self.progress.add_task("load", total=total, table=table)
        self.started = time.perf_counter()

    def __enter__(self) -> Any:
        self.progress.start()
        return lambda rows: self.progress.advance(self.task, rows)

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def release_spooled(session: Session) -> None:
    """Remove the files the session's ingest spooled (Spark mode, ``views.spark.spool``),
    once the ingest is over, committed or not."""
    for directory in session._spooled:
        shutil.rmtree(directory, ignore_errors=True)
    session._spooled.clear()
