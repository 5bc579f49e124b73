"""The epochs' times, written into the state's record ten epochs at a time.

What ``views.history`` and ``views.relation_times`` keep of each epoch (its time, each
table's and view's time and rows, its profile) is for ``ivm status``, ``db.stats()``
and ``explain(analyze=True)``. Written in each epoch's own transaction it costs three
statements an epoch (≈1.5 ms of a 1k-row epoch's 40 ms, whatever its views), so an
epoch that commits is held here, and the held epochs are written together, one INSERT a
table, inside the transaction of every ``WRITE_EVERY``-th epoch (with that epoch's own),
and of a DDL statement that forgets a relation's record; and before the record is read
in this process (``stats``, ``status``) and when the session closes, in a transaction of
their own. Each write is in the transaction of what it records or of a later one, so the
record never holds an epoch that did not commit; a crash loses the times of the epochs
held then (at most ``WRITE_EVERY - 1``), never state.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from ivm.execution.profile import EpochProfile
from ivm.views import history, relation_times

WRITE_EVERY = 10
"""Epochs held before they are written (with the epoch that makes them this many)."""


@dataclass(frozen=True)
class EpochRecord:
    """One committed epoch's times, as the record keeps them."""

    epoch: int
    seconds: float
    committed: datetime.datetime
    profile: EpochProfile


class EpochRecords:
    """The committed epochs whose times are not yet written (see the module docstring)."""

    def __init__(self) -> None:
        self.held: list[EpochRecord] = []
        self._tables_made = False  # the record's tables exist (made once per session)

    def log(
        self, con: duckdb.DuckDBPyConnection, profile: EpochProfile,
        on_commit: list[Callable[[], None]], on_rollback: list[Callable[[], None]],
    ) -> None:
        """Inside the epoch's transaction: hold its times once it commits, or write them with
        the held ones now when they make ``WRITE_EVERY``."""
        record = EpochRecord(
            profile.epoch, sum(profile.phases.values()),
            datetime.datetime.now(datetime.UTC), profile,
        )
        if len(self.held) + 1 < WRITE_EVERY:
            self._make_tables(con, on_commit)  # at a session's first epoch, as ever
            on_commit.append(lambda: self.held.append(record))
            return
        self._write(con, [record], on_commit, on_rollback)

    def write_held(
        self, con: duckdb.DuckDBPyConnection,
        on_commit: list[Callable[[], None]], on_rollback: list[Callable[[], None]],
    ) -> None:
        """Inside an open transaction (a DDL's): write the held epochs (held again if it
        rolls back)."""
        if self.held:
            self._write(con, [], on_commit, on_rollback)

    def flush(self, con: duckdb.DuckDBPyConnection) -> None:
        """Outside any transaction: write the held epochs in a transaction of their own."""
        if not self.held:
            return
        committed: list[Callable[[], None]] = []
        rolled_back: list[Callable[[], None]] = []
        con.execute("BEGIN TRANSACTION").fetchall()
        try:
            self._write(con, [], committed, rolled_back)
            con.execute("COMMIT").fetchall()
        except BaseException:
            con.execute("ROLLBACK").fetchall()
            for action in rolled_back:
                action()
            raise
        for action in committed:
            action()

    def _write(
        self, con: duckdb.DuckDBPyConnection, new: list[EpochRecord],
        on_commit: list[Callable[[], None]], on_rollback: list[Callable[[], None]],
    ) -> None:
        """Write the held epochs and ``new`` in the open transaction; the held ones are
        held no more, unless it rolls back."""
        records, self.held = [*self.held, *new], []
        on_rollback.append(lambda: self._held_again(records, new))
        self._make_tables(con, on_commit)
        history.record(con, [(r.epoch, r.seconds, r.committed) for r in records])
        relation_times.record(con, [r.profile for r in records])

    def _make_tables(
        self, con: duckdb.DuckDBPyConnection, on_commit: list[Callable[[], None]]
    ) -> None:
        """The record's tables, if the state has none (once per session)."""
        if not self._tables_made:
            history.create(con)
            relation_times.create(con)
            on_commit.append(self._made)

    def _made(self) -> None:
        self._tables_made = True

    def _held_again(self, records: list[EpochRecord], new: list[EpochRecord]) -> None:
        """The transaction that wrote ``records`` rolled back: those that were held are
        held again (``new``'s epoch did not commit)."""
        again = [r for r in records if all(r is not n for n in new)]
        self.held = sorted([*again, *self.held], key=lambda r: r.epoch)
