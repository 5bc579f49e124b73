"""A session shared by threads: one call at a time changes it, reads see the last commit.

Two mechanisms, chosen for what each kind of call needs:

* **Reads never see an epoch in flight** (``db.read``, ``db.sql``; the Flight server's
  requests too). In embedded mode they run on a cursor of their own (``ReadCursors``:
  one per thread, a DuckDB connection to the session's database with the state's
  settings), in autocommit: DuckDB gives each statement a snapshot of the committed
  data (MVCC), so a read sees every table and view as of the last commit, whatever the
  session's own connection has done in its open transaction, and neither waits for the
  other. Temporary tables (an epoch's scratch tables) belong to the session's connection
  and are invisible there, as they should be. In Spark mode an epoch's tasks commit in
  each partition file before the driver commits the epoch, so a file read then could
  be one epoch ahead of another: reads there take the session lock below, and wait for
  the epoch in flight. A read resolves its table or view among those of the last
  commit (``Names._readable``): a DDL in flight on another thread changes nothing it sees
  (Spark mode checks again once its turn comes, and that the session is still open).
  ``close`` stops new reads and interrupts and waits for those in flight (they raise
  ``StateError``): DuckDB will not close a connection while a cursor of it is busy.
* **Everything else runs one call at a time** (``serialize_public``): every public
  method and property of the session but the reads above (and ``epoch``) holds the
  session's re-entrant lock, so an ``ingest`` (the whole epoch: its transaction, the
  commit, and telling the subscribers), a DDL script, ``subscribe``, ``explain``,
  ``stats``, ``close``… each waits for the call in flight. ``subscribe`` thus takes
  its snapshot of the view at a committed epoch E, after E's subscribers were told, and
  its callback hears of every epoch after E exactly once. The lock is re-entrant: a
  subscriber's callback, which runs inside the ``ingest`` that told it, may call the
  session (it must not wait for another thread that does).

The alternative for Spark mode, reads of each partition as of the driver's committed
epoch (undoing an epoch applied ahead), would read every file twice; the lock costs a
reader at most one epoch's wait.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from ivm.errors import SqlError, StateError
from ivm.guard import wrapped_property
from ivm.storage.settings import apply

F = TypeVar("F", bound=Callable[..., Any])

CONCURRENT = frozenset({"read", "sql", "epoch"})
"""Public names that never take the session lock (they read committed state)."""

_SERIALIZED = "__ivm_serialized__"


class ReadCursors:
    """Per-thread cursors of one DuckDB connection, each given the state's settings.

    ``close`` waits for the reads in flight (interrupting them: each then raises
    ``StateError``), so that the connection, which refuses to close while a cursor of it
    is busy on another thread, closes next."""

    def __init__(self, con: duckdb.DuckDBPyConnection,
                 settings: Callable[[], Mapping[str, str]]) -> None:
        self._con = con
        self._settings = settings
        self._local = threading.local()
        self._guard = threading.Lock()  # cursors are made one at a time
        self._idle = threading.Condition(self._guard)  # told when no read is in flight
        self._in_flight = 0  # reads begun and not ended
        self._busy: set[duckdb.DuckDBPyConnection] = set()  # their cursors, once made
        self.closed = False

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (made at its first read; closed with the connection)."""
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            with self._guard:
                if self.closed:
                    raise StateError("this session is closed: open a new one with ivm.connect()")
                cursor = self._con.cursor()
            apply(cursor, self._settings())  # TimeZone, Calendar hold per connection
            # An epoch sets arrow_lossless_conversion (HUGEINT as 16 raw bytes…) for its
            # exports on the session's connection alone; a reader states its own anyway.
            cursor.execute("SET SESSION arrow_lossless_conversion = false").fetchall()
            self._local.cursor = cursor
        return cursor

    def query(self, sql: str, error_class: type[SqlError] | None = SqlError) -> pa.Table:
        """The rows of read-only ``sql`` as of the last commit; DuckDB's refusal as
        ``error_class`` (None: raised as it is). Counted in flight from before its cursor
        is made (which is a call on the connection too) until its rows are out."""
        with self._guard:
            if self.closed:
                raise StateError("this session is closed: open a new one with ivm.connect()")
            self._in_flight += 1
        cursor = None
        try:
            cursor = self.cursor()
            with self._guard:
                self._busy.add(cursor)
            return cursor.sql(sql).to_arrow_table()
        except duckdb.Error as error:
            if self.closed:
                raise StateError("this session was closed during the read") from error
            if error_class is None or isinstance(error, duckdb.OutOfMemoryException):
                raise
            raise error_class(f"query failed: {error}") from error
        finally:
            with self._guard:
                self._in_flight -= 1
                self._busy.discard(cursor)  # type: ignore[arg-type]
                self._idle.notify_all()

    def close(self) -> None:
        """No more reads: those in flight are interrupted and waited for (the connection's
        closing then closes every cursor)."""
        with self._guard:
            self.closed = True
            for cursor in self._busy:
                cursor.interrupt()
            self._idle.wait_for(lambda: not self._in_flight)


def serialized(method: F) -> F:
    """``method`` holding its session's lock (``self._lock``) while it runs."""
    if getattr(method, _SERIALIZED, False):
        return method

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    setattr(call, _SERIALIZED, True)
    return call  # type: ignore[return-value]


def serialize_public(cls: type, concurrent: frozenset[str] = CONCURRENT) -> type:
    """Make every public method and property accessor of ``cls`` (its bases' included)
    hold the session lock, but those named in ``concurrent``."""
    for name in dir(cls):
        if name.startswith("_") or name in concurrent:
            continue
        attribute = next((b.__dict__[name] for b in cls.__mro__ if name in b.__dict__), None)
        if isinstance(attribute, property):
            setattr(cls, name, wrapped_property(attribute, serialized))
        elif callable(attribute) and not isinstance(attribute, type | staticmethod | classmethod):
            setattr(cls, name, serialized(attribute))
    return cls


__all__ = ["CONCURRENT", "ReadCursors", "serialize_public", "serialized"]
