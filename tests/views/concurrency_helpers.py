"""What the concurrency tests share (``test_concurrency.py``, ``test_concurrency_ddl.py``):
a table whose every committed epoch has a known invariant (each epoch moves every row's
value by one), one statement reading it and both its views, and reader threads that check
every read against it."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa

import ivm

ROWS = 40
DDL = """
    CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT);
    CREATE VIEW totals AS SELECT COUNT(*) AS n, SUM(k) AS total, SUM(k * k) AS squares FROM t;
    CREATE VIEW by_k AS SELECT k, COUNT(*) AS n FROM t GROUP BY k;
"""
CONSISTENT = """
    SELECT (SELECT COUNT(*) FROM t) AS rows, (SELECT SUM(k) FROM t) AS sum_k,
           (SELECT MIN(k) FROM t) AS lo, (SELECT MAX(k) FROM t) AS hi,
           (SELECT total FROM totals) AS total, (SELECT squares FROM totals) AS squares,
           (SELECT n FROM totals) AS n, (SELECT list(n) FROM by_k) AS groups
"""
"""One statement over a table and its views: one snapshot of all three."""


def epoch_batch(epoch: int) -> pa.Table:
    """Epoch ``epoch``'s change: every row's k goes from ``epoch - 1`` to ``epoch``. After
    it commits, t holds ROWS rows of k = epoch, and each view agrees."""
    ids = list(range(ROWS))
    if epoch == 1:
        return pa.table({"id": ids, "k": [1] * ROWS, "__w": [1] * ROWS})
    return pa.table({"id": ids * 2, "k": [epoch - 1] * ROWS + [epoch] * ROWS,
                     "__w": [-1] * ROWS + [1] * ROWS})


def committed_epoch(read: dict[str, Any]) -> int:
    """The epoch the one-statement read ``CONSISTENT`` shows; fails on a half-applied one."""
    epoch = read["lo"]
    assert read["rows"] == ROWS and read["hi"] == epoch, read  # t: one whole epoch
    assert read["sum_k"] == read["total"] == ROWS * epoch, read  # totals agrees with t
    assert read["squares"] == ROWS * epoch**2 and read["n"] == ROWS, read
    assert read["groups"] == [ROWS], read  # and by_k
    return int(epoch)


class Readers:
    """Threads reading ``db`` in a loop until stopped, each checking every read."""

    def __init__(self, db: ivm.Session) -> None:
        self.db = db
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.seen: dict[str, list[int]] = {}
        self.threads = [threading.Thread(target=self._loop, args=(name, read), daemon=True)
                        for name, read in (("sql", self._sql), ("read", self._read))]

    def _sql(self) -> int:
        return committed_epoch(self.db.sql(CONSISTENT).to_pylist()[0])

    def _read(self) -> int:
        (row,) = self.db.read("totals").to_pylist()
        epoch = row["total"] // ROWS  # n copies of one k: n·k, n·k² (and n·Σk² = (Σk)² so)
        assert row["n"] == ROWS and row["total"] == ROWS * epoch, row
        assert row["squares"] == ROWS * epoch**2, row
        return int(epoch)

    def _loop(self, name: str, read: Callable[[], int]) -> None:
        seen = self.seen.setdefault(name, [])
        try:
            while not self.stop.is_set():
                seen.append(read())
                time.sleep(0.01)  # the ingest thread gets the interpreter and cores too
        except BaseException as error:  # noqa: BLE001 - reported by check()
            self.errors.append(error)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def wait_for_reads(self, counts: dict[str, int]) -> None:
        """Until every reader read again since ``counts`` (or failed)."""
        deadline = time.monotonic() + 60
        while not self.errors and time.monotonic() < deadline and any(
            len(self.seen.get(n, [])) <= counts.get(n, 0) for n in ("sql", "read")
        ):
            time.sleep(0.001)

    def check(self, last: int) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not self.errors, self.errors[0]
        for name, epochs in self.seen.items():
            assert epochs == sorted(epochs), f"{name}: an older epoch after a newer one"
            assert set(epochs) <= set(range(1, last + 1)), name
            assert len(set(epochs)) > 1, f"{name} read during one epoch only"




class Loops:
    """Threads each calling a function in a loop until stopped (or until it raises one of
    ``ends``, which ends that thread as expected), keeping what each call returned or
    raised of ``allowed`` (by name); anything else raised is an error, kept for
    ``check``."""

    def __init__(self, calls: dict[str, Callable[[], Any]],
                 allowed: tuple[type[BaseException], ...] = (),
                 ends: tuple[type[BaseException], ...] = (), pause: float = 0.005) -> None:
        self.stop = threading.Event()
        self.pause = pause  # between two calls: the other threads get the interpreter too
        self.allowed, self.ends = allowed, ends
        self.errors: list[tuple[str, BaseException]] = []
        self.outcomes: dict[str, list[Any]] = {name: [] for name in calls}
        self.threads = [threading.Thread(target=self._loop, args=(name, call), daemon=True)
                        for name, call in calls.items()]

    def _loop(self, name: str, call: Callable[[], Any]) -> None:
        outcomes = self.outcomes[name]
        while not self.stop.is_set():
            try:
                outcomes.append(call())
            except self.ends as error:
                outcomes.append(error)
                return
            except self.allowed as error:
                outcomes.append(error)
            except BaseException as error:  # noqa: BLE001 - reported by check()
                self.errors.append((name, error))
                return
            time.sleep(self.pause)

    def start(self) -> Loops:
        for thread in self.threads:
            thread.start()
        return self

    def wait_for(self, name: str, outcome: Any, timeout: float = 60) -> None:
        """Until thread ``name`` has had ``outcome`` (or failed, or ``timeout`` passed)."""
        deadline = time.monotonic() + timeout
        while (outcome not in self.outcomes[name] and not self.errors
               and time.monotonic() < deadline):
            time.sleep(0.005)

    def check(self, timeout: float = 60) -> dict[str, list[Any]]:
        """Stop every thread (each must end within ``timeout``: none hangs), fail on an
        error; returns every thread's outcomes."""
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=timeout)
        assert not any(t.is_alive() for t in self.threads), "a thread still runs: it hangs"
        if self.errors:
            name, error = self.errors[0]
            raise AssertionError(f"{name}: {type(error).__name__}: {error}") from error
        return self.outcomes


def absent(error: ivm.SqlError) -> bool:
    """Whether ``error`` says a view is not there (not created yet, or dropped)."""
    return "no table or view named" in str(error) or "no view named" in str(error)


class Checks:
    """The calls reader threads make during DDL, each checking what it read."""

    SUBSCRIPTIONS = 60
    """The most subscriptions ``subscribe`` makes."""

    def __init__(self, db: ivm.Session) -> None:
        self.db = db
        self.feeds: list[tuple[Any, list[tuple[int, pa.Table]]]] = []

    def sql(self) -> int:
        return committed_epoch(self.db.sql(CONSISTENT).to_pylist()[0])

    def long(self) -> int:
        """A read that takes a while (so that a close meets it in flight)."""
        return int(self.db.sql("SELECT sum(i) AS s FROM range(2000000) t(i)")["s"][0].as_py())

    def table(self) -> int:
        read = self.db.read("t")
        assert read.column_names in (["id", "k"], ["id", "k", "z"]), read.column_names
        ks = set(read.column("k").to_pylist())
        assert read.num_rows == ROWS and len(ks) == 1, (read.num_rows, ks)
        return int(ks.pop())

    def extra(self) -> str:
        try:
            rows = self.db.read("extra").to_pylist()
        except ivm.SqlError as error:
            assert absent(error), error
            return "absent"
        assert len(rows) == 1 and rows[0]["n"] == ROWS, rows
        return "present"

    def subscribe(self, view: str = "extra") -> str:
        if len(self.feeds) >= self.SUBSCRIPTIONS:
            return "enough"
        feed: list[tuple[int, pa.Table]] = []
        try:
            subscription = self.db.subscribe(view, lambda e, d: feed.append((e, d)))
        except ivm.SqlError as error:
            assert absent(error), error
            return "absent"
        self.feeds.append((subscription, feed))
        return "subscribed"


def feed_contents(feed: list[tuple[int, pa.Table]]) -> Counter[tuple[Any, ...]]:
    contents: Counter[tuple[Any, ...]] = Counter()
    for _, delta in feed:
        for row in delta.to_pylist():
            contents[(row["k"], row["n"])] += row["__w"]
    return +contents
