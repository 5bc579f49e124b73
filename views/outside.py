"""The session's face to the outside: changefeeds, exactly-once epochs, and what they need.

Each capability lives in its own module and object (``views.epochs``,
``views.changefeeds``); this part of ``Session`` holds them and keeps each
public method a thin delegate with its documentation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ivm.views import history
from ivm.views.changefeeds import Callback, Changefeeds, Subscription
from ivm.views.epoch_records import EpochRecords
from ivm.views.epochs import EpochLedger
from ivm.views.streaming import Select, Streams, StreamSink

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object


class Outside(_Base):
    """Changefeeds and exactly-once epochs of ``Session`` (see the module docstring)."""

    def _init_outside(self) -> None:
        self._ledger = EpochLedger()
        self._feeds = Changefeeds(self)
        self._streams = Streams(self)
        self._init_stats()
        self._records = EpochRecords()  # the epochs' times, written some at a time
        self._on_close_actions: list[Callable[[], None]] = []  # run first at close

    # -- public API --------------------------------------------------------------------------

    def subscribe(self, view: str, callback: Callback, snapshot: bool = True) -> Subscription:
        """Call ``callback(epoch, delta)`` with every epoch's delta of ``view`` after commit.

        ``view``: a view's name. ``callback``: any callable taking the epoch number and
        the view's delta (a ``pyarrow.Table``: the view's columns and ``__w``, possibly
        empty). ``snapshot=True`` (the default) first calls it at once with the view's
        current contents as a delta from empty, at the current epoch; ``False`` only with
        the epochs to come. A callback that raises never undoes its epoch: the failure is
        warned of (``ivm.IvmWarning``) and kept in ``Subscription.failures``, and later
        epochs are still delivered. ``Subscription.cancel()`` stops it. Subscriptions
        live as long as the session, or until a DDL drops the view or gives it other
        contents (then ``Subscription.ended`` says why, with an ``IvmWarning``). Sinks
        that write deltas out: ``ivm.sinks``. Both modes (called on the driver in Spark
        mode).
        """
        return self._feeds.subscribe(view, callback, snapshot)

    def changelog(self, view: str, retain: int = 100) -> None:
        """Keep ``view``'s deltas of its last ``retain`` epochs in the state, for
        ``changes``. Each epoch's delta is logged in the epoch's own transaction, so the
        log holds every committed epoch exactly once, across restarts. ``retain=0`` stops
        and deletes the log; calling again changes the retention and keeps the log. The log
        of a view that is dropped or replaced goes with it. Both modes (Spark mode keeps
        the log in the driver's catalog database)."""
        self._feeds.set_changelog(view, retain)

    def changes(self, view: str, since: int = 0) -> pa.Table:
        """The changes of ``view`` (it must keep a ``changelog``) in the epochs after
        ``since``: its columns, ``__w`` and ``__epoch``, ordered by epoch. ``since``
        older than what the log retains raises ``ivm.EpochError``. Both modes."""
        return self._feeds.changes(view, since)

    def sink(
        self, tables: str | Mapping[str, Select], mode: str = "insert", name: str | None = None
    ) -> StreamSink:
        """A Spark Structured Streaming sink: ``df.writeStream.foreachBatch(db.sink("orders"))``
        applies each micro-batch to table ``orders`` as one epoch, exactly once per batch id.

        ``tables``: a table's name (the whole micro-batch goes to it) or a mapping of table
        names to None or a function taking the micro-batch DataFrame and returning that
        table's rows (several tables in one atomic epoch). ``mode``: as ``ingest``'s.
        ``name``: the stream's name in the state (default: its table names); its last
        batch id is recorded in the epoch's own transaction, so a batch id applied already
        (a query restarted from its checkpoint) is skipped. Both modes: embedded collects
        each micro-batch as Arrow, Spark mode applies it on the executors.
        ``StreamSink.last_batch()`` is the last batch id applied (-1: none).
        """
        self._check_open()
        return StreamSink(self, tables, mode, name)

    # -- the epoch's hooks -------------------------------------------------------------------

    def _replayed(self, epoch: int | None) -> dict[str, pa.Table] | None:
        """The deltas of an epoch ``ingest(..., epoch=)`` repeats; None: apply the batch."""
        self._check_open()
        return self._ledger.replay(epoch, self.epoch)

    def _no_rows(self, changes: dict[str, Any]) -> bool:
        """Whether every prepared batch is known to hold no rows (a Spark DataFrame's rows
        are not counted: it is applied)."""
        return all(c is None or (isinstance(c, pa.Table) and c.num_rows == 0)
                   for c in changes.values())

    def _unchanged(self) -> dict[str, pa.Table]:
        """Every view's empty delta (an ingest that applied nothing)."""
        return {name: self._fetch_change(name, {}) for name in self._views}

    def _log_epoch(self, changed: dict[str, str]) -> None:
        """Inside the epoch's transaction: log the views' changes (changefeeds), the streams'
        batch ids, and the epoch's times (held, and written some epochs at a time:
        ``views.epoch_records``)."""
        self._feeds.log(changed, self.epoch + 1)
        self._streams.record(self.epoch + 1)
        self._records.log(self._con, self._profile, self._on_commit, self._on_rollback)

    def _after_epoch(self, deltas: dict[str, pa.Table]) -> None:
        """After the epoch committed: keep its deltas, tell the subscribers."""
        self._ledger.applied(self.epoch, deltas)
        self._record_times(self.last_profile)
        self._feeds.publish(self.epoch, deltas)

    def _history(self) -> history.EpochTimes | None:
        """The last epoch's time and the median of the epochs the state recorded."""
        self._records.flush(self._con)
        return history.read(self._con)
