"""Loads larger than memory, with progress: a batch streamed in chunks within one epoch.

``ingest(table, reader)`` with a ``pyarrow.RecordBatchReader`` or a DuckDB relation
(read as a stream of record batches) applies the rows chunk by chunk, each chunk
through every view as the next part of one epoch, all in the epoch's single
transaction: the epoch commits whole or not at all, and only one chunk is held in
memory at a time (besides the views' changes, which the epoch returns). The views'
changes of the chunks are summed into the epoch's delta. What the session keeps in
memory (arrangements, row indexes, operators' memory) follows each chunk, and is
dropped whole if the epoch rolls back. Chunks apply in order,
so a chunk may delete or upsert rows an earlier chunk inserted; ``sequence=`` orders
versions within a chunk.

``progress=True`` shows a progress bar (``rich``) of the rows applied, on standard
error; ``None`` (the default) shows it when standard error is a terminal and the
load is streamed. A large in-memory table is streamed in chunks when ``progress=True``.

In Spark mode a reader or relation is read whole and applied as a Spark batch (pass a
Spark DataFrame for loads larger than the driver's memory).
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from ivm.errors import ExecutionError, IvmError
from ivm.execution.profile import EpochProfile
from ivm.plan.sql import W, column_list, consolidate_sql
from ivm.schema import quote
from ivm.views.diagnose import ViewFailed
from ivm.views.modes import spark_mode
from ivm.views.transaction import run_all

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object

CHUNK_ROWS = 1_000_000
"""Rows per chunk of a large in-memory table streamed for its progress bar."""


class Loading(_Base):
    """Streamed loads of ``Session.ingest`` (see the module docstring)."""

    def _streamed(self, table: Any, batch: Any, progress: bool | None) -> bool:
        """Whether this ingest streams its batch in chunks (embedded mode, one table)."""
        if isinstance(table, Mapping) or spark_mode(self):
            return False
        if isinstance(batch, pa.RecordBatchReader | duckdb.DuckDBPyRelation):
            return True
        return progress is True and isinstance(batch, pa.Table) and batch.num_rows > CHUNK_ROWS

    def _load_stream(
        self, table: str, batch: Any, mode: str, sequence: str | None, progress: bool | None,
        forced: bool = False,
    ) -> dict[str, pa.Table]:
        """Apply the streamed batch as one epoch (see the module docstring); ``forced``:
        even if it has no rows (``ingest(..., epoch=N)``)."""
        self._check_open()
        name = self._ingestible(table)
        reader, total = _reader(batch)
        chunks = _chunks(reader)
        first = next(chunks)
        if first.num_rows == 0 and not forced:
            return self._unchanged()  # an empty batch is a no-op (API: ingest)
        show = progress if progress is not None else sys.stderr.isatty()
        profile = self._profile = EpochProfile(self.epoch + 1)
        sums: dict[str, str] = {}
        try:
            with self._transaction(ExecutionError), _bar(show, name, total) as advance:
                self._on_rollback.append(self._forget_memory)
                for chunk in itertools.chain([first], chunks):
                    with profile.phase("batches"):
                        changes = self._prepared(name, chunk, mode, sequence)
                    try:
                        changed = self._apply(changes, upsert=mode == "upsert")
                    finally:
                        self._unregister_batches()
                    self._add_up(sums, changed)
                    # What the epoch keeps in memory follows each chunk (the next reads
                    # it); a roll-back forgets all of it (_forget_memory).
                    actions, self._on_commit = self._on_commit, []
                    run_all(actions)
                    advance(chunk.num_rows)
                changed = self._summed(sums)
                self._advance_epoch(changed)
        except ViewFailed as failure:
            raise failure.error from failure.error.__cause__
        with profile.phase("results"):
            result = {view: self._fetch_change(view, changed) for view in self._views}
        with profile.phase("compaction"):
            self._engine.compact()
        self.last_profile = profile
        self._after_epoch(result)
        return result

    def _forget_memory(self) -> None:
        """A streamed load rolled back: what memory held of its chunks is dropped (it is
        built again from the state when next needed)."""
        self._after_unexpected()
        self._arrangements.clear()

    def _add_up(self, sums: dict[str, str], changed: dict[str, str]) -> None:
        """Add each view's change of one chunk to the epoch's running sum."""
        for view, scratch in changed.items():
            target = quote(f"__ivm_load_{view}")
            if view not in sums:
                self._con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {target} AS SELECT * FROM {scratch}"
                ).fetchall()
                sums[view] = target
            else:
                self._con.execute(f"INSERT INTO {target} SELECT * FROM {scratch}").fetchall()

    def _summed(self, sums: dict[str, str]) -> dict[str, str]:
        """Each view's summed change, consolidated (views whose chunks cancel out drop)."""
        changed = {}
        for view, target in sums.items():
            names = self._views[view].schema.names
            self._con.execute(
                f"CREATE OR REPLACE TEMP TABLE {target} AS "
                f"{consolidate_sql(f'SELECT {column_list(names)}, {W} FROM {target}', names)}"
            ).fetchall()
            if self._con.execute(f"SELECT 1 FROM {target} LIMIT 1").fetchall():
                changed[view] = target
        return changed


def _reader(batch: Any) -> tuple[pa.RecordBatchReader, int | None]:
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


def _chunks(reader: pa.RecordBatchReader) -> Iterator[pa.Table]:
    """The reader's rows as tables of about ``CHUNK_ROWS`` rows (small batches gathered)."""
    pending: list[pa.RecordBatch] = []
    rows, chunks = 0, 0
    for batch in reader:
        pending.append(batch)
        rows += batch.num_rows
        if rows >= CHUNK_ROWS:
            yield pa.Table.from_batches(pending, reader.schema)
            pending, rows, chunks = [], 0, chunks + 1
    if rows or not chunks:  # the rest, or one empty chunk for an empty stream
        yield pa.Table.from_batches(pending, reader.schema)


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
