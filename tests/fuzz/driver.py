"""Drive queries as views through CDC epochs and say how each one ended.

Shared by the SQL fuzzer and the sqllogictest runner. ``drive`` puts a group of queries
in one ``Harness`` (one ivm session and its DuckDB oracle), creates each as a view,
applies the same epochs to all of them and checks each view on its own after every
epoch (contents against DuckDB, the delta's sum, the plan as plain SQL: the harness's
checks), so that a failing view ends alone while the others go on. Every query ends
as one ``Outcome``:

* exact: maintained and equal to DuckDB after every epoch;
* refused: ``UnsupportedSQL`` at CREATE VIEW (ivm names what it cannot maintain);
* wrong: a check failed (rows, names or types differ from DuckDB's, a delta does not
  add up, or the plan as plain SQL disagrees);
* internal error: any other exception, at CREATE VIEW or in an epoch (an
  ``ExecutionError`` where DuckDB computes the view on the same data is one too);
* too slow: CREATE VIEW or one epoch of the view took more than ``slow`` seconds;
* fails in DuckDB too: the data of an epoch makes DuckDB's own query fail (a scalar
  subquery of several rows, a division by zero), so there is nothing to compare.

When ``ingest`` itself fails with several views live, the failure cannot be pinned on
one of them: each live view is then run again alone through the same epochs.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import duckdb
from oracle.harness import Epoch, Harness, quote, rows_of

import ivm


class Outcome(StrEnum):
    """How a query ended (see the module docstring)."""

    EXACT = "exact"
    REFUSED = "refused"
    WRONG = "wrong"
    INTERNAL = "internal error"
    SLOW = "too slow"
    DATA_ERROR = "fails in DuckDB too"


FAILURES = (Outcome.WRONG, Outcome.INTERNAL, Outcome.SLOW)
"""The outcomes that are bugs (or too slow)."""


@dataclass
class Result:
    """One query's end: its outcome, a one-paragraph detail, the epoch it ended in
    (0: at CREATE VIEW) and the slowest step it took (seconds)."""

    name: str
    sql: str
    outcome: Outcome
    detail: str = ""
    epoch: int = 0
    seconds: float = 0.0
    rows: int = 0
    """The most rows the view held after an epoch (a view always empty tests little)."""
    history: list[Epoch] = field(default_factory=list, repr=False)
    """The epochs applied up to its end (warm-up ones first), to replay it."""


class TooSlow(Exception):
    """Raised by the alarm of ``time_limit``."""


@contextmanager
def time_limit(seconds: float) -> Iterator[list[bool]]:
    """An alarm after ``seconds`` (a hang stops there); yields a flag set when it rang
    (DuckDB turns the signal into its own 'interrupted' error)."""
    rang = [False]

    def ring(*_: Any) -> None:
        rang[0] = True
        raise TooSlow(f"still running after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield rang
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_ENGINE_ERRORS = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                  duckdb.InternalException, duckdb.NotImplementedException)
"""DuckDB errors on generated SQL: ivm wrote a statement DuckDB cannot run."""


def first_line(error: BaseException, limit: int = 400) -> str:
    text = f"{type(error).__name__}: {error}"
    cause = error.__cause__
    if cause is not None:
        text += f" [cause {type(cause).__name__}: {str(cause).splitlines()[0][:200]}]"
    return text[:limit]


class Stopwatch:
    """Seconds since it started, the CPU this process had during them: a view is too slow
    by its own work, not by other jobs on a loaded machine (wall time, at most)."""

    def __init__(self) -> None:
        self.start_wall, self.start_cpu = time.perf_counter(), time.process_time()

    def wall(self) -> float:
        return time.perf_counter() - self.start_wall

    def seconds(self) -> float:
        return min(self.wall(), time.process_time() - self.start_cpu)


def check_failed(error: BaseException) -> bool:
    """Whether ``error`` is a failed check of the harness (an ``assert`` in
    ``oracle/harness.py``), not an assertion inside ivm or a library."""
    if not isinstance(error, AssertionError):
        return False
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.endswith(
        ("oracle/harness.py", "oracle\\harness.py"))


EpochSource = Callable[[Harness, int], Epoch]
"""The i-th epoch (counting warm-up epochs) given the harness (its tables' contents)."""


class Isolate(Exception):
    """``ingest`` failed with several views live (epoch index, the error, whether the
    alarm rang)."""

    def __init__(self, index: int, error: BaseException, rang: bool = False) -> None:
        super().__init__(index, error)
        self.index, self.error, self.rang = index, error, rang


@dataclass
class Drive:
    """A group of queries in one harness; ``run`` returns each one's ``Result``."""

    ddl: Sequence[str]
    queries: Mapping[str, str]
    source: EpochSource
    epochs: int
    warmup: int = 0
    slow: float = 5.0
    hard: float = 30.0
    domains: Mapping[str, Sequence[Any]] | None = None
    oracle_ddl: Sequence[str] = ()
    """Statements for the oracle alone, after the tables (views ``ddl`` created in ivm)."""
    nested: bool = False
    """A replay inside ``_isolate``: a failing ingest ends every live view, no isolating."""

    def run(self) -> dict[str, Result]:
        self.results: dict[str, Result] = {}
        try:
            harness = Harness(list(self.ddl), self.domains)
        except Exception as error:  # noqa: BLE001 - the tables themselves are refused
            outcome = (Outcome.REFUSED if isinstance(error, ivm.UnsupportedSQL)
                       else Outcome.INTERNAL)
            return {n: Result(n, q, outcome, f"the tables: {first_line(error)}")
                    for n, q in self.queries.items()}
        for statement in self.oracle_ddl:
            harness.oracle.execute(statement)
        self.slowest: dict[str, float] = {}
        self.rows: dict[str, int] = {}
        try:
            for i in range(self.warmup):
                harness.apply(self.source(harness, i))
            for name, sql in self.queries.items():
                self._create(harness, name, sql)
            for i in range(self.epochs):
                live = [n for n in self.queries if n not in self.results]
                if not live:
                    break
                self._epoch(harness, self.source(harness, self.warmup + i), i + 1, live)
        except Isolate as failure:
            self._isolate(harness.history, failure)
        finally:
            harness.close()
        for name, sql in self.queries.items():
            self.results.setdefault(name, Result(name, sql, Outcome.EXACT, epoch=self.epochs,
                                                 seconds=self.slowest.get(name, 0.0),
                                                 rows=self.rows.get(name, 0),
                                                 history=list(harness.history)))
        return self.results

    # -- steps ----------------------------------------------------------------------------

    def _end(self, harness: Harness, name: str, outcome: Outcome, detail: str, epoch: int,
             seconds: float = 0.0) -> None:
        self.results[name] = Result(name, self.queries[name], outcome, detail, epoch,
                                    max(seconds, self.slowest.get(name, 0.0)),
                                    self.rows.get(name, 0), list(harness.history))
        if name in harness.views:
            try:
                harness.drop_view(name)
            except Exception:  # noqa: BLE001 - it ended already; keep the others going
                for per_view in (harness.views, harness.oracle_sql, harness.applied):
                    per_view.pop(name, None)

    def _create(self, harness: Harness, name: str, sql: str) -> None:
        start = Stopwatch()
        try:
            with time_limit(self.hard) as rang:
                harness.db.execute(f"CREATE VIEW {quote(name)} AS {sql}")
        except ivm.UnsupportedSQL as error:
            self.results[name] = Result(name, sql, Outcome.REFUSED, str(error)[:400])
            return
        except BaseException as error:  # noqa: BLE001 - classified, never swallowed silently
            if isinstance(error, KeyboardInterrupt) and not rang[0]:
                raise
            outcome = Outcome.SLOW if rang[0] else Outcome.INTERNAL
            self.results[name] = Result(name, sql, outcome, first_line(error, 4000),
                                        seconds=start.seconds())
            return
        seconds = start.seconds()
        harness.oracle.execute(f"CREATE VIEW {quote(name)} AS {sql}")
        harness.views[name] = harness.oracle_sql[name] = sql
        try:
            read = harness.db.read(name)
            harness.applied[name] = Counter(rows_of(read))
            self.rows[name] = read.num_rows
            harness.check_view(name, "initially", read)
        except BaseException as error:  # noqa: BLE001
            outcome = Outcome.WRONG if check_failed(error) else Outcome.INTERNAL
            self._end(harness, name, outcome, first_line(error, 4000), 0, seconds)
            return
        self.slowest[name] = seconds
        if seconds > self.slow:
            self._end(harness, name, Outcome.SLOW, f"CREATE VIEW took {seconds:.1f} s", 0,
                      seconds)

    def _epoch(self, harness: Harness, epoch: Epoch, number: int, live: list[str]) -> None:
        harness.history.append(epoch)
        batches = {c.table: c.render(harness.specs[c.table], harness.schemas[c.table])
                   for c in epoch.changes}
        start = Stopwatch()
        try:  # the epoch does every live view's work: a hang is ``hard`` per view
            with time_limit(self.hard * len(live)) as rang:
                if epoch.single:
                    ((table, batch),) = batches.items()
                    deltas = harness.db.ingest(table, batch)
                else:
                    deltas = harness.db.ingest(batches)
        except BaseException as error:  # noqa: BLE001
            if isinstance(error, KeyboardInterrupt) and not rang[0]:
                raise
            if len(live) > 1 and not self.nested:
                raise Isolate(len(harness.history) - 1, error, rang[0]) from error
            if len(live) > 1:
                for name in live:
                    self._end(harness, name, Outcome.INTERNAL, f"together: {first_line(error)}",
                              number)
                return
            self._ingest_failed(harness, epoch, number, live[0], error, rang[0])
            return
        wall, busy = start.wall(), start.seconds()
        for change in epoch.changes:
            harness._apply_to_oracle(change)
        where = f"after epoch {number}"
        try:
            harness.check_tables(where)
        except AssertionError as error:
            if not self.nested:
                raise Isolate(len(harness.history) - 1, error) from error
            for name in live:
                self._end(harness, name, Outcome.INTERNAL, first_line(error, 4000), number)
            return
        profile = harness.db.last_profile  # None while no epoch ran (empty batches: no-ops)
        timed = profile.views if profile is not None else {}
        for name in live:
            # a view's share of the epoch's wall time, scaled to the CPU the process had
            seconds = (busy if len(live) == 1 else
                       timed.get(name, wall) * busy / max(wall, 1e-9))
            self.slowest[name] = max(self.slowest.get(name, 0.0), seconds)
            try:
                read = harness.db.read(name)
                self.rows[name] = max(self.rows.get(name, 0), read.num_rows)
                harness.check_delta(name, deltas[name], where, read)
                harness.check_view(name, where, read)
            except AssertionError as error:
                outcome = Outcome.WRONG if check_failed(error) else Outcome.INTERNAL
                self._end(harness, name, outcome, first_line(error, 4000), number)
                continue
            except duckdb.Error as error:
                outcome = (Outcome.DATA_ERROR if self._oracle_fails(harness, name)
                           else Outcome.INTERNAL)
                self._end(harness, name, outcome, first_line(error, 4000), number)
                continue
            except Exception as error:  # noqa: BLE001
                self._end(harness, name, Outcome.INTERNAL, first_line(error, 4000), number)
                continue
            if seconds > self.slow:
                self._end(harness, name, Outcome.SLOW, f"epoch {number} took {seconds:.1f} s",
                          number, seconds)

    @staticmethod
    def _oracle_fails(harness: Harness, name: str) -> bool:
        """Whether DuckDB's own query fails on the oracle's current data."""
        try:
            harness.oracle.sql(harness.oracle_sql[name]).fetchall()
        except duckdb.Error:
            return True
        return False

    def _ingest_failed(self, harness: Harness, epoch: Epoch, number: int, name: str,
                       error: BaseException, rang: bool) -> None:
        """The one live view's epoch failed: too slow, DuckDB fails too, or internal."""
        if rang:
            self._end(harness, name, Outcome.SLOW, f"epoch {number}: {first_line(error)}",
                      number, self.hard)
            return
        if isinstance(error, ivm.ExecutionError) and not isinstance(
                error.__cause__, _ENGINE_ERRORS):
            for change in epoch.changes:
                harness._apply_to_oracle(change)
            if self._oracle_fails(harness, name):
                self._end(harness, name, Outcome.DATA_ERROR, first_line(error), number)
                return
        self._end(harness, name, Outcome.INTERNAL,
                  f"epoch {number}: {first_line(error, 4000)}\n{epoch!r}", number)

    def _replay(self, names: Sequence[str], replay: list[Epoch], warm: int,
                through: int | None = None) -> dict[str, Result]:
        """``names`` alone through ``replay``, then the source's epochs up to ``through``."""
        queries = {n: self.queries[n] for n in names}
        total = len(replay) if through is None else through

        def source(harness: Harness, i: int) -> Epoch:
            return replay[i] if i < len(replay) else self.source(harness, i)

        return Drive(self.ddl, queries, source, total - warm, warm, self.slow, self.hard,
                     self.domains, self.oracle_ddl, nested=True).run()

    def _isolate(self, history: list[Epoch], failure: Isolate) -> None:
        """Run each view still live alone through the epochs up to the failing one; when
        none fails alone, find the fewest views that still fail together (dropping one
        view at a time): those end as internal errors, the others as they did alone. An
        epoch stopped by the alarm is no error: each view then runs alone through every
        epoch, as slow as it is by itself."""
        replay = history[: failure.index + 1]
        warm = min(self.warmup, len(replay))
        through = self.warmup + self.epochs if failure.rang else None
        live = [n for n in self.queries if n not in self.results]
        alone = {}
        for name in live:
            alone.update(self._replay([name], replay, warm, through))
        if not failure.rang and all(r.outcome == Outcome.EXACT for r in alone.values()):
            culprits = list(live)
            for name in live:
                trial = [n for n in culprits if n != name]
                if len(trial) > 1 and any(
                        r.outcome != Outcome.EXACT
                        for r in self._replay(trial, replay, warm).values()):
                    culprits = trial
            for name in culprits:
                others = [n for n in culprits if n != name]
                alone[name] = Result(name, self.queries[name], Outcome.INTERNAL,
                                     f"fails only beside other views ({others}): "
                                     f"{first_line(failure.error, 4000)}",
                                     len(replay) - warm, history=list(replay))
        self.results.update(alone)
