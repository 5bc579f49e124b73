"""Spark Structured Streaming into ivm: ``df.writeStream.foreachBatch(db.sink("orders"))``.

``db.sink(...)`` returns a ``StreamSink``, the function ``foreachBatch`` calls with
each micro-batch and its batch id. The sink applies each batch id exactly once:

* the stream's progress (its last batch id applied, and the epoch it became) is
  kept in the state, in table ``__ivm_streams``, written in the epoch's own
  transaction, so it is committed with the batch's changes or not at all;
* a batch id at or below the recorded one was applied already (a query restarted
  from its checkpoint repeats the batch it was running when it stopped): skipped;
* any later batch id is applied as the next epoch, and recorded.

So the query's checkpoint and the ivm state may stop at any point, in either
order, and a restart resumes exactly once. A stream is named (``name=``; by
default the table names): two queries writing the same tables need two names,
and a query started afresh (a new checkpoint, batch ids from 0 again) needs a
new name too, or its first batches are taken for ones already applied.

In embedded mode each micro-batch is collected to the driver as Arrow
(``DataFrame.toArrow``); in Spark mode it is applied as a DataFrame, on the
executors, and cached for the epoch (its stages may read it more than once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ivm.errors import IvmError
from ivm.views.modes import spark_mode

if TYPE_CHECKING:
    from ivm.views.session import Session

STREAMS = "__ivm_streams"
"""The state's table of streams: name, last batch id applied, the epoch it became."""

Select = Callable[[Any], Any] | None
"""What a table takes of each micro-batch: None (all of it) or a function of the DataFrame."""


class StreamSink:
    """The ``foreachBatch`` function of one stream into ivm (see the module docstring)."""

    def __init__(
        self, session: Session, tables: str | Mapping[str, Select], mode: str, name: str | None
    ) -> None:
        selects = {tables: None} if isinstance(tables, str) else dict(tables)
        if not selects:
            raise IvmError("sink: name at least one table")
        for table, select in selects.items():
            session._ingestible(table)  # a table of this session, not a view
            if select is not None and not callable(select):
                raise IvmError(
                    f"sink: the value for table {table!r} must be None (the whole micro-batch) "
                    f"or a function of the micro-batch DataFrame, not {type(select).__name__}"
                )
        if mode not in ("insert", "upsert"):
            raise IvmError(f"unknown ingest mode {mode!r}: use 'insert' or 'upsert'")
        self.session = session
        self.selects = selects
        self.mode = mode
        self.name = name if name is not None else "+".join(sorted(selects))

    def __call__(self, frame: Any, batch_id: int) -> None:
        """Apply micro-batch ``batch_id`` (``frame``: its DataFrame) unless applied already."""
        s = self.session
        if batch_id <= s._streams.last_batch(self.name):
            return
        batches = {t: frame if f is None else f(frame) for t, f in self.selects.items()}
        cached = []
        if spark_mode(s):
            cached = [b.persist() for b in batches.values()]
        else:
            batches = {t: b.toArrow() for t, b in batches.items()}
        try:
            s._streams.pending = (self.name, batch_id)
            s.ingest(batches, mode=self.mode)
        finally:
            s._streams.pending = None
            for batch in cached:
                batch.unpersist()

    def last_batch(self) -> int:
        """The last batch id this stream applied (-1: none yet)."""
        return self.session._streams.last_batch(self.name)


class Streams:
    """The streams' progress in a session's state (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.pending: tuple[str, int] | None = None
        """(stream, batch id) the epoch being applied records, if a sink applies it."""

    def last_batch(self, name: str) -> int:
        """The last batch id stream ``name`` applied (-1: none)."""
        con = self.session._con
        if not self._present():
            return -1
        found = con.execute(f"SELECT batch_id FROM {STREAMS} WHERE name = ?", [name]).fetchall()
        return int(found[0][0]) if found else -1

    def progress(self) -> dict[str, tuple[int, int]]:
        """(last batch id, epoch) of every stream, by name."""
        if not self._present():
            return {}
        rows = self.session._con.execute(f"SELECT name, batch_id, epoch FROM {STREAMS}").fetchall()
        return {str(n): (int(b), int(e)) for n, b, e in rows}

    def record(self, epoch: int) -> None:
        """Inside the epoch's transaction: record the pending batch id as applied."""
        if self.pending is None:
            return
        name, batch_id = self.pending
        con = self.session._con
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {STREAMS} "
            "(name VARCHAR PRIMARY KEY, batch_id BIGINT, epoch BIGINT)"
        ).fetchall()
        con.execute(f"DELETE FROM {STREAMS} WHERE name = ?", [name]).fetchall()
        con.execute(f"INSERT INTO {STREAMS} VALUES (?, ?, ?)", [name, batch_id, epoch]).fetchall()

    def _present(self) -> bool:
        return bool(
            self.session._con.execute(
                "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND NOT temporary", [STREAMS]
            ).fetchall()
        )

