"""Changefeeds: subscribers told each epoch's delta after commit, and stored changelogs.

``db.subscribe(view, callback)`` registers ``callback(epoch, delta)``: with
``snapshot=True`` it is first called at once with the view's current contents
as a delta (every row with its count as ``__w``, at the current epoch), then
after every committed epoch with that epoch's delta of the view (possibly
empty). Callbacks run after the commit: one that raises never undoes the epoch;
its failure is reported with an ``IvmWarning`` and kept in the subscription's
``failures``, and the subscription goes on. A DDL that drops its view, or replaces or
refills it with other contents (a new definition, a view it reads replaced), ends the
subscription once it commits, with an ``IvmWarning`` (``Subscription.ended`` says why):
the deltas that followed would no longer add up to the view. A view refilled with the
same columns and contents (the views over a table gaining a column) keeps its subscribers.

``db.changelog(view, retain=N)`` makes the view keep its deltas of the last N
epochs in the state (``__ivm_log_<view>``), written in the epoch's own
transaction, so ``db.changes(view, since=E)`` returns every change after epoch
E exactly once, across restarts. The log of a view dropped or replaced goes
with it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from ivm.errors import EpochError, IvmError, IvmWarning, SqlError
from ivm.plan.sql import W, column_list, consolidate_sql
from ivm.schema import quote

if TYPE_CHECKING:
    from ivm.views.session import Session

EPOCH = "__epoch"
"""The column a changelog adds: the epoch of each change."""
CONFIG = "__ivm_changelogs"
"""The state's table of changelogs: view name, epochs retained, epoch it started after."""

Callback = Callable[[int, pa.Table], object]
"""A subscriber: called with (epoch, the view's delta in that epoch)."""


@dataclass
class Subscription:
    """A callback told every epoch's delta of one view (``db.subscribe``)."""

    view: str
    callback: Callback
    failures: list[tuple[int, BaseException]] = field(default_factory=list)
    """(epoch, exception) of every call that raised."""
    active: bool = True
    ended: str | None = None
    """Why a DDL ended the subscription (None while it lasts, or once cancelled)."""

    def cancel(self) -> None:
        """Stop calling the callback."""
        self.active = False

    def end(self, reason: str) -> None:
        """Stop, because the view's deltas no longer add up to it (``reason``), warning."""
        self.active, self.ended = False, reason
        warnings.warn(f"ivm: the subscription to view {self.view!r} ended: {reason}; its "
                      "deltas would no longer add up to the view (subscribe again)",
                      IvmWarning, stacklevel=2)

    def deliver(self, epoch: int, delta: pa.Table) -> None:
        """Call the callback; a failure is reported, kept, and goes no further."""
        if not self.active:
            return
        try:
            self.callback(epoch, delta)
        except Exception as error:  # noqa: BLE001 - the epoch is committed: report, go on
            self.failures.append((epoch, error))
            warnings.warn(
                f"ivm: a subscriber of view {self.view!r} failed on epoch {epoch} (the epoch "
                f"stays applied): {type(error).__name__}: {error}",
                IvmWarning,
                stacklevel=4,
            )


def same_rows(con: duckdb.DuckDBPyConnection, one: pa.Table, other: pa.Table) -> bool:
    """Whether two tables have the same columns and the same rows, copies counted."""
    if not one.schema.equals(other.schema):
        return False
    cursor = con.cursor()  # its own: what the session's connection has registered stays
    try:
        cursor.register("__ivm_one", one)
        cursor.register("__ivm_other", other)
        differing = cursor.execute(
            "SELECT count(*) FROM ((SELECT * FROM __ivm_one EXCEPT ALL SELECT * FROM "
            "__ivm_other) UNION ALL (SELECT * FROM __ivm_other EXCEPT ALL SELECT * FROM "
            "__ivm_one))").fetchall()
    finally:
        cursor.close()
    return differing[0][0] == 0


def log_table(view: str) -> str:
    """The state table keeping a view's changelog."""
    return quote(f"__ivm_log_{view}")


class Changefeeds:
    """A session's subscriptions and changelogs (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.subscriptions: list[Subscription] = []
        self._watched: set[str] = set()  # views whose subscriptions this DDL may end
        self._retained: dict[str, tuple[int, int]] | None = None  # read at first use

    # -- subscribers ------------------------------------------------------------------------

    def subscribe(self, view: str, callback: Callback, snapshot: bool) -> Subscription:
        """Register ``callback`` for ``view`` (and call it with the contents first)."""
        name = self._view(view)
        if not callable(callback):
            raise IvmError(f"subscribe: callback must be callable, not {type(callback).__name__}")
        subscription = Subscription(name, callback)
        if snapshot:
            subscription.deliver(self.session.epoch, self.contents(name))
        self.subscriptions.append(subscription)
        return subscription

    def contents(self, view: str) -> pa.Table:
        """The view's contents as a delta from empty: each distinct row with its count."""
        s = self.session
        names = s._views[view].schema.names
        s._con.register("__ivm_contents", s.read(view))  # Spark mode reads on Spark
        try:
            rows = consolidate_sql(
                f"SELECT {column_list(names)}, 1 AS {W} FROM __ivm_contents", names
            )
            return s._con.sql(rows).to_arrow_table()
        finally:
            s._con.unregister("__ivm_contents")

    def publish(self, epoch: int, deltas: dict[str, pa.Table]) -> None:
        """Tell every active subscriber its view's delta of the committed ``epoch``."""
        self.subscriptions = [s for s in self.subscriptions if s.active]
        for subscription in list(self.subscriptions):
            delta = deltas.get(subscription.view)
            if delta is not None:
                subscription.deliver(epoch, delta)

    # -- changelogs -------------------------------------------------------------------------

    def set_changelog(self, view: str, retain: int) -> None:
        """Keep (``retain`` > 0) or stop keeping (0) the view's changelog."""
        if isinstance(retain, bool) or not isinstance(retain, int) or retain < 0:
            raise IvmError(f"retain must be a non-negative integer of epochs, not {retain!r}")
        s = self.session
        name = self._view(view)
        existing = self._config(name)
        with s._transaction():
            self._changed()
            s._con.execute(
                f"CREATE TABLE IF NOT EXISTS {CONFIG} (name VARCHAR, retain BIGINT, since BIGINT)"
            ).fetchall()
            s._con.execute(f"DELETE FROM {CONFIG} WHERE name = ?", [name]).fetchall()
            if retain == 0:
                s._con.execute(f"DROP TABLE IF EXISTS {log_table(name)}").fetchall()
                return
            if existing is None:
                columns = ", ".join(
                    f"{quote(c.name)} {c.type}" for c in s._views[name].schema.columns
                )
                s._con.execute(
                    f"CREATE TABLE {log_table(name)} ({columns}, {W} BIGINT, {EPOCH} BIGINT)"
                ).fetchall()
            since = s.epoch if existing is None else existing[1]
            s._con.execute(
                f"INSERT INTO {CONFIG} VALUES (?, ?, ?)", [name, retain, since]
            ).fetchall()

    def changes(self, view: str, since: int) -> pa.Table:
        """The view's changes after epoch ``since``: its columns, ``__w`` and ``__epoch``."""
        s = self.session
        name = self._view(view)
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise EpochError(f"since must be an epoch (an integer >= 0), not {since!r}")
        config = self._config(name)
        if config is None:
            raise IvmError(
                f"view {name!r} keeps no changelog: db.changelog({name!r}, retain=N) keeps "
                "the deltas of its last N epochs for db.changes"
            )
        retain, started = config
        oldest = max(started, s.epoch - retain)  # the log holds epochs after this one
        if since < oldest:
            raise EpochError(
                f"view {name!r}: changes since epoch {since} are no longer kept: its changelog "
                f"holds the epochs after {oldest} (it retains {retain})"
            )
        return s._con.sql(
            f"SELECT * FROM {log_table(name)} WHERE {EPOCH} > {since} ORDER BY {EPOCH}"
        ).to_arrow_table()

    def log(self, changed: dict[str, str], epoch: int) -> None:
        """Inside the epoch's transaction: append each logged view's change (``changed``:
        the changed views' scratch tables) and drop what is past retention."""
        s = self.session
        for name, (retain, _) in self._logs().items():
            if name not in s._views:
                continue
            table = log_table(name)
            if name in changed:
                names = s._views[name].schema.names
                s._con.execute(
                    f"INSERT INTO {table} SELECT {column_list(names)}, {W}, {epoch} "
                    f"FROM {changed[name]}"
                ).fetchall()
            s._con.execute(f"DELETE FROM {table} WHERE {EPOCH} <= {epoch - retain}").fetchall()

    def removed(self, name: str) -> None:
        """A view is dropped (inside the DDL's transaction): its changelog goes with it, and
        its subscriptions end once the DDL commits unless the view is back with the same
        contents (``_continue_or_end``)."""
        s = self.session
        if name in self._logs():
            self._changed()
            s._con.execute(f"DELETE FROM {CONFIG} WHERE name = ?", [name]).fetchall()
            s._con.execute(f"DROP TABLE IF EXISTS {log_table(name)}").fetchall()
        subscribed = [x for x in self.subscriptions if x.active and x.view == name]
        if subscribed and name not in self._watched:  # its contents as last committed
            self._watched.add(name)
            before = s.read(name)
            s._on_commit.append(lambda: self._continue_or_end(name, subscribed, before))
            s._on_rollback.append(lambda: self._watched.discard(name))

    def _continue_or_end(self, name: str, subscribed: list[Subscription],
                         before: pa.Table) -> None:
        """After the DDL committed: the subscriptions of view ``name`` go on if it holds
        what it held (the same columns and rows), else they end."""
        s = self.session
        self._watched.discard(name)
        if name not in s._views:
            reason = "the view was dropped"
        elif same_rows(s._con, before, s.read(name)):
            return
        else:
            reason = "a DDL gave the view other contents"
        for subscription in subscribed:
            subscription.end(reason)

    def retained(self) -> dict[str, int]:
        """Epochs retained by each view keeping a changelog."""
        return {name: retain for name, (retain, _) in self._logs().items()}

    # -- helpers ----------------------------------------------------------------------------

    def _view(self, view: str) -> str:
        s = self.session
        s._check_open()
        name = s._resolve(view)
        if name not in s._views:
            raise SqlError(f"no view named {view!r}")
        return name

    def _logs(self) -> dict[str, tuple[int, int]]:
        """(retain, started after epoch) of each view keeping a changelog (cached)."""
        if self._retained is None:
            con = self.session._con
            present = con.execute(
                "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND NOT temporary", [CONFIG]
            ).fetchall()
            rows = con.execute(f"SELECT * FROM {CONFIG}").fetchall() if present else []
            self._retained = {str(n): (int(r), int(e)) for n, r, e in rows}
        return self._retained

    def _changed(self) -> None:
        """The changelogs change in the open transaction: read them again after it."""
        self._retained = None
        self.session._on_commit.append(self._forget)
        self.session._on_rollback.append(self._forget)

    def _forget(self) -> None:
        self._retained = None

    def _config(self, name: str) -> tuple[int, int] | None:
        """(retain, started after epoch) of the view's changelog; None: it keeps none."""
        return self._logs().get(name)
