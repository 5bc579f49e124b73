"""Benchmark: event-time ASOF JOIN of trades against quotes, against DuckDB recomputing it.

Each view in a session of its own over the same market (1M trades with a key, 1M
quotes without one, 1,000 symbols by default, every time within one day):

* ``asof``: each trade with the latest quote of its symbol at or before it
  (``trades t ASOF JOIN quotes q ON t.sym = q.sym AND t.ts >= q.ts``);
* ``asof_left`` (``--views asof,asof_left``): the same as an ASOF LEFT JOIN, the
  trades before their symbol's first quote kept with NULLs.

The first data covers the day up to 23:00, uniform; every quote has a time of its own
(so no two quotes of a symbol tie and DuckDB's answer is not left to chance). The
first contents are timed as one ``db.ingest`` of both tables into a session where the
view is defined, against DuckDB's one-off query. Then, ``--repeats`` times each, one
batch of: ``--batch`` late quotes (times anywhere before the newest trade: they arrive
late and out of order, and move the match of the trades after them); ``--batch`` new
trades (times in the next second after the newest one: the clock moves on); and both in
one batch. The incremental time is the whole ``db.ingest`` call; the baseline is DuckDB
running the same query from scratch (``CREATE OR REPLACE TABLE … AS``) over plain tables
holding the same rows, in the same process (a separate ``duckdb.connect()``); inserting
the batch into those tables is timed apart and added in the last ratio. Printed: median
times, the ratios recompute / ivm (never asserted), the view rows each batch moved, and
where ivm's time went: the epoch's phases and every statement an operator materialized
(``EpochRunner.materialize``, wrapped to time each one), medians per kind of batch.
``--profile`` also prints ``db.explain(view, analyze=True)`` after each kind's slowest
epoch; ``--plans`` runs one more (untimed) epoch of each kind whose every statement
DuckDB profiles first, and prints each one's costliest operators. At the end each view
must equal recomputation.

``temporal`` (in ``--views``): the processing-time temporal join ``orders o JOIN prices
FOR SYSTEM_TIME AS OF PROCTIME() AS p ON o.item = p.item`` (``prices`` keyed by item),
once per size of ``prices`` in ``--prices`` (10k, 100k, 1M), each over ``--orders``
(100k) first orders: the epoch of ``--batch`` new orders, and of as many new orders
with as many prices changed (one upsert), to show what a batch costs as ``prices``
grows. No query recomputes it (it depends on arrival), so the baselines are DuckDB
joining the batch alone with ``prices`` (what a lookup per batch costs) and, for scale,
the plain join of every order with ``prices``; the check at the end is against the
batches joined with ``prices`` as they arrived.

    .venv/bin/python benchmarks/bench_asof.py [--trades 1000000] [--quotes 1000000]
        [--symbols 1000] [--batch 1000] [--repeats 5] [--views asof,asof_left,temporal]
        [--prices 10000,100000,1000000] [--orders 100000] [--quick] [--profile] [--plans]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from bench_aggregate import difference
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import ivm
from ivm.execution.embedded import EpochRunner
from ivm.operators.base import Operator

DDL = (
    "CREATE TABLE trades (id BIGINT PRIMARY KEY, sym VARCHAR, ts TIMESTAMP, qty INTEGER); "
    "CREATE TABLE quotes (sym VARCHAR, ts TIMESTAMP, price DECIMAL(12,2))"
)
QUERY = (
    "SELECT t.id, t.sym, t.ts, t.qty, q.price, q.ts AS quote_ts "
    "FROM trades t {join} quotes q ON t.sym = q.sym AND t.ts >= q.ts"
)
VIEWS = {"asof": QUERY.format(join="ASOF JOIN"), "asof_left": QUERY.format(join="ASOF LEFT JOIN")}
TEMPORAL_DDL = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, item BIGINT, qty INTEGER); "
    "CREATE TABLE prices (item BIGINT PRIMARY KEY, price DECIMAL(12,2))"
)
TEMPORAL = (
    "SELECT o.id, o.item, o.qty, p.price FROM orders o "
    "JOIN prices FOR SYSTEM_TIME AS OF PROCTIME() AS p ON o.item = p.item"
)
LOOKUP = "SELECT o.id, o.item, o.qty, p.price FROM {orders} o JOIN prices p ON o.item = p.item"
"""The temporal join's baselines: the batch's orders (or all of them) joined with prices."""
MIDNIGHT = int(np.datetime64("2024-06-03T00:00:00", "us").astype(np.int64))
"""The day's start, in microseconds since 1970."""
LOADED = 23 * 3600 * 10**6
"""The first data's times lie in [midnight, 23:00)."""
STEP = 10**6
"""Each batch of new trades lies in the second after the newest trade."""
SEED = 7


class Market:
    """The trades and quotes so far, and random batches of them (vectorized)."""

    def __init__(self, symbols: int, rng: np.random.Generator) -> None:
        self.rng = rng
        self.names = pa.array([f"S{i:04d}" for i in range(symbols)])
        self.clock = LOADED  # the newest trade is before this (µs after midnight)
        self.next_id = 0
        self.quote_times = np.empty(0, np.int64)  # sorted: every quote's time

    def _symbols(self, n: int) -> pa.Array:
        return self.names.take(pa.array(self.rng.integers(0, len(self.names), n)))

    @staticmethod
    def _times(offsets: np.ndarray) -> pa.Array:
        return pa.array(MIDNIGHT + offsets, pa.timestamp("us"))

    def trades(self, n: int, start: int, end: int) -> pa.Table:
        """``n`` new trades (new ids) at random times in [start, end)."""
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        return pa.table({
            "id": pa.array(ids),
            "sym": self._symbols(n),
            "ts": self._times(self.rng.integers(start, end, n)),
            "qty": pa.array(self.rng.integers(1, 1000, n), pa.int32()),
        })

    def quotes(self, n: int) -> pa.Table:
        """``n`` quotes at random times before the clock, no time used before."""
        times = np.empty(0, np.int64)
        while len(times) < n:
            draw = np.unique(self.rng.integers(0, self.clock, n - len(times)))
            times = np.union1d(times, draw[~self._used(draw)])
        self.rng.shuffle(times)  # out of order
        ordered = np.sort(times)  # into the sorted times used, without sorting them again
        self.quote_times = np.insert(
            self.quote_times, np.searchsorted(self.quote_times, ordered), ordered)
        cents = self.rng.integers(1_000, 100_000, n)
        return pa.table({
            "sym": self._symbols(n),
            "ts": self._times(times),
            "price": pa.array(cents / 100).cast(pa.decimal128(12, 2)),
        })

    def _used(self, times: np.ndarray) -> np.ndarray:
        """Which of ``times`` some quote has already (a binary search in the sorted times)."""
        if not len(self.quote_times):
            return np.zeros(len(times), dtype=bool)
        at = np.minimum(np.searchsorted(self.quote_times, times), len(self.quote_times) - 1)
        return self.quote_times[at] == times

    def new_trades(self, n: int) -> pa.Table:
        """``n`` trades in the next second; moves the clock on."""
        batch = self.trades(n, self.clock, self.clock + STEP)
        self.clock += STEP
        return batch


def written(runner: EpochRunner) -> int:
    """Rows the epoch's statements wrote so far (from its profile)."""
    profile = runner.profile
    return sum(s.rows for s in profile.operators.values()) if profile is not None else 0


Hotspot = tuple[str, int, float]
"""A DuckDB operator in a profiled statement: what (and on what), rows out, seconds."""


def hotspots(con: duckdb.DuckDBPyConnection, sql: str, top: int = 6) -> list[Hotspot]:
    """DuckDB's own profile of ``sql``, run once more into a scratch table: its ``top``
    costliest operators, by the time DuckDB's profiler gives each."""
    path = Path(tempfile.gettempdir()) / f"bench_asof_{os.getpid()}.json"
    con.execute(f"SET enable_profiling = 'json'; SET profiling_output = '{path}'")
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE __bench_asof_plan AS {sql}")
    finally:
        con.execute("PRAGMA disable_profiling")
        con.execute("DROP TABLE IF EXISTS __bench_asof_plan")
    nodes, found = json.loads(path.read_text()).get("operator", []), []
    while nodes:
        node = nodes.pop()
        nodes += node.get("children", [])
        info = node.get("extra_info", {})
        on = next((str(info[k]) for k in ("Table", "Conditions", "Aggregates", "Order By", "Groups",
                                          "Expression") if k in info), "")
        found.append((f"{node.get('type', '?')} {on}"[:70], int(node.get("intermediate_rows", 0)),
                      float(node.get("timing", 0.0))))
    path.unlink(missing_ok=True)
    return sorted(found, key=lambda f: -f[2])[:top]


Plans = list[tuple[str, float, list[Hotspot]]]
"""Per statement: its label, its time, its costliest operators (``hotspots``)."""


@contextmanager
def statements_timed(into: list[tuple[str, float, int]],
                     plans: Plans | None = None) -> Iterator[None]:
    """Time every statement an operator materializes (``EpochRunner.materialize``):
    appends (operator kind and part, seconds, rows written) to ``into``; with ``plans``,
    profiles each statement in DuckDB first (``hotspots``) and appends that to ``plans``."""
    original = EpochRunner.materialize

    def timed(runner: EpochRunner, op: Operator, part: str, sql: str,
              rows: Mapping[str, pa.Table] | None = None) -> str:
        costliest = []
        if plans is not None:
            for name, table in (rows or {}).items():  # what the statement reads by name
                runner.con.register(name, table)
            costliest = hotspots(runner.con, sql)
            for name in rows or {}:
                runner.con.unregister(name)
        before = written(runner)
        start = time.perf_counter()
        result = original(runner, op, part, sql, rows)
        seconds = time.perf_counter() - start
        into.append((f"{op.kind}: {part}", seconds, written(runner) - before))
        if plans is not None:
            plans.append((f"{op.kind}: {part}", seconds, costliest))
        return result

    EpochRunner.materialize = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        EpochRunner.materialize = original  # type: ignore[method-assign]


@dataclass
class Timings:
    """One kind of batch, repeated: ivm's epochs and what DuckDB took."""

    ivm: list[float] = field(default_factory=list)
    recompute: list[float] = field(default_factory=list)
    applied: list[float] = field(default_factory=list)
    full: list[float] = field(default_factory=list)
    """The temporal join's second baseline: the plain join of every order."""
    moved: list[int] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statements: dict[str, list[tuple[float, int]]] = field(
        default_factory=lambda: defaultdict(list))
    slowest: str = ""
    """``explain(analyze=True)`` after the slowest epoch (with ``--profile``)."""


Row = tuple[str, ...]
"""One line of a printed table."""


def recompute_seconds(plain: duckdb.DuckDBPyConnection, sql: str) -> float:
    """Time DuckDB computing the view from scratch over its plain tables."""
    start = time.perf_counter()
    plain.execute(f"CREATE OR REPLACE TABLE recomputed AS {sql}")
    return time.perf_counter() - start


def apply_seconds(plain: duckdb.DuckDBPyConnection, batches: dict[str, pa.Table],
                  replace: bool = False) -> float:
    """Insert the batch into the baseline's plain tables (``replace``: a row replaces the
    one with its key), in order; its time."""
    start = time.perf_counter()
    for table, rows in batches.items():
        plain.register("batch", rows)
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        plain.execute(f"{verb} INTO {table} BY NAME SELECT * FROM batch")
        plain.unregister("batch")
    return time.perf_counter() - start


def moved_rows(delta: pa.Table) -> int:
    """View rows a change inserted or deleted (the sum of its |weights|)."""
    return int(np.abs(delta["__w"].to_numpy()).sum()) if delta.num_rows else 0


def ms(seconds: list[float]) -> str:
    """The median, in milliseconds."""
    return f"{statistics.median(seconds) * 1000:,.1f}"


def timed_row(name: str, kind: str, t: Timings) -> Row:
    """A line of the results table: medians (and ivm's slowest) over the repeats."""
    inc, rec = statistics.median(t.ivm), statistics.median(t.recompute)
    both = statistics.median(a + r for a, r in zip(t.applied, t.recompute, strict=True))
    slowest = f"{max(t.ivm) * 1000:,.1f}" if len(t.ivm) > 1 else ""
    return (name, kind, f"{inc * 1000:,.1f}", slowest, f"{rec * 1000:,.1f}", f"{rec / inc:.1f}x",
            f"{both / inc:.1f}x", f"{statistics.median(t.moved):,.0f}")


def where_rows(name: str, kind: str, t: Timings) -> list[Row]:
    """Lines of the where-the-time-goes table: the phases, then each statement."""
    others = [p for p in t.phases if p != "views"]
    rest = [sum(run) for run in zip(*(t.phases[p] for p in others), strict=True)]
    each = ", ".join(f"{p} {ms(t.phases[p])}" for p in others if ms(t.phases[p]) != "0.0")
    lines = [(name, kind, "phase: views (computing the view's change)", ms(t.phases["views"]),
              ""), (name, kind, f"other phases: {each}", ms(rest), "")]
    for label, runs in t.statements.items():
        rows = statistics.median(r for _, r in runs)
        lines.append((name, kind, f"  {label}", ms([s for s, _ in runs]), f"{rows:,.0f}"))
    return lines


def epoch(db: ivm.Session, name: str, batch: dict[str, pa.Table], t: Timings,
          profile: bool, mode: str = "insert") -> None:
    """One timed ``ingest``: its time, the view rows it moved, its phases and statements."""
    statements: list[tuple[str, float, int]] = []
    with statements_timed(statements):
        start = time.perf_counter()
        delta = db.ingest(batch, mode=mode)
        seconds = time.perf_counter() - start
    if profile and seconds > max(t.ivm, default=0.0):
        t.slowest = db.explain(name, analyze=True)
    t.ivm.append(seconds)
    t.moved.append(moved_rows(delta[name]))
    for phase, s in db.last_profile.phases.items():
        t.phases[phase].append(s)
    for label, s, rows in statements:
        t.statements[label].append((s, rows))


def report(console: Console, name: str, kind: str, t: Timings, profile: bool) -> None:
    """With ``--profile``: ``explain(analyze=True)`` after the kind's slowest epoch."""
    if profile:
        console.print(f"{name}, {kind}: the slowest epoch ({max(t.ivm) * 1000:.1f} ms)")
        console.print(escape(t.slowest))


def plan_epoch(console: Console, db: ivm.Session, name: str, kind: str,
               batch: dict[str, pa.Table], mode: str = "insert") -> None:
    """``--plans``: one more epoch of a kind, untimed, whose every statement DuckDB profiles
    first; prints each statement's costliest operators."""
    plans: Plans = []
    with statements_timed([], plans):
        db.ingest(batch, mode=mode)
    rows = [(f"{label} ({seconds * 1000:,.1f})" if i == 0 else "", escape(what), f"{n:,}",
             f"{op_seconds * 1000:,.1f}")
            for label, seconds, costliest in plans
            for i, (what, n, op_seconds) in enumerate(costliest)]
    print_table(console, f"{name}, {kind}: DuckDB's costliest operators in each statement "
                "(one more epoch, profiled)", ["statement (ms)", "operator", "rows out", "ms"],
                rows, 2)

def print_table(console: Console, title: str, columns: list[str], rows: list[Row],
                left: int) -> None:
    """Print ``rows`` under ``columns``, the first ``left`` columns left-aligned."""
    table = Table(title=title)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < left else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def run_view(console: Console, name: str,
             args: argparse.Namespace) -> tuple[list[Row], list[Row]]:
    """Load the market, time the batches; rows for the results and where-time-goes tables.

    The first contents: one ``ingest`` of the first data into a session where the view is
    defined, against DuckDB's one-off query over plain tables (loading them untimed)."""
    rng = np.random.default_rng(SEED)
    market = Market(args.symbols, rng)
    first = {"trades": market.trades(args.trades, 0, LOADED), "quotes": market.quotes(args.quotes)}
    sql = VIEWS[name]
    plain = duckdb.connect()
    plain.execute(DDL)
    loaded = apply_seconds(plain, first)
    db = ivm.connect()
    view = f"{name}_view"  # ASOF is a keyword of DuckDB's SQL: not a view's name
    db.execute(f"{DDL}; CREATE VIEW {view} AS {sql}")
    kind = "initial load (one ingest, view defined)"
    t = Timings(recompute=[recompute_seconds(plain, sql)], applied=[loaded])
    epoch(db, view, first, t, args.profile)
    console.print(f"{name}: initial load {t.ivm[0]:.2f} s, {t.moved[0]:,} rows in the view")
    report(console, name, kind, t, args.profile)
    results, where = [timed_row(name, kind, t)], where_rows(name, kind, t)
    n = args.batch
    kinds = {
        f"{n:,} late quotes": lambda: {"quotes": market.quotes(n)},
        f"{n:,} new trades": lambda: {"trades": market.new_trades(n)},
        f"both ({n:,} + {n:,}, one batch)": lambda: {"quotes": market.quotes(n),
                                                     "trades": market.new_trades(n)},
    }
    for kind, make in kinds.items():
        t = Timings()
        for _ in range(args.repeats):
            batch = make()
            epoch(db, view, batch, t, args.profile)
            t.applied.append(apply_seconds(plain, batch))
            t.recompute.append(recompute_seconds(plain, sql))
        results.append(timed_row(name, kind, t))
        where += where_rows(name, kind, t)
        report(console, name, kind, t, args.profile)
        if args.plans:
            batch = make()
            plan_epoch(console, db, view, kind, batch)
            apply_seconds(plain, batch)

    problem = difference(db.read(view), plain.sql(sql).to_arrow_table())
    assert problem is None, f"{name} differs from recomputation: {problem}"
    console.print(f"{name}: equals recomputation after the run")
    db.close()
    plain.close()
    return results, where


def run_temporal(console: Console, size: int,
                 args: argparse.Namespace) -> tuple[list[Row], list[Row]]:
    """The temporal join over ``size`` prices: its epochs against DuckDB's lookups."""
    rng = np.random.default_rng(SEED)
    next_id = 0

    def orders(n: int) -> pa.Table:
        nonlocal next_id
        next_id += n
        return pa.table({"id": pa.array(np.arange(next_id - n, next_id, dtype=np.int64)),
                         "item": pa.array(rng.integers(0, size, n)),
                         "qty": pa.array(rng.integers(1, 100, n), pa.int32())})

    def prices(items: np.ndarray) -> pa.Table:
        cents = rng.integers(100, 100_000, len(items))
        return pa.table({"item": pa.array(items, pa.int64()),
                         "price": pa.array(cents / 100).cast(pa.decimal128(12, 2))})

    plain = duckdb.connect()
    plain.execute(f"{TEMPORAL_DDL}; CREATE TABLE expected AS "
                  f"{LOOKUP.format(orders='orders')} LIMIT 0")

    def lookup(batch: dict[str, pa.Table]) -> float:
        """DuckDB joining the batch's orders with prices (timed), kept as expected rows."""
        plain.register("new_orders", batch["orders"])
        seconds = recompute_seconds(plain, LOOKUP.format(orders="new_orders"))
        plain.unregister("new_orders")
        plain.execute("INSERT INTO expected SELECT * FROM recomputed")
        return seconds

    db = ivm.connect()
    db.execute(f"{TEMPORAL_DDL}; CREATE VIEW temporal AS {TEMPORAL}")
    first = {"prices": prices(np.arange(size)), "orders": orders(args.orders)}
    db.ingest(first)
    apply_seconds(plain, first)
    lookup(first)
    n, name = args.batch, f"temporal, {size:,} prices"
    kinds = {f"{n:,} new orders": lambda: {"orders": orders(n)},
             f"{n:,} new orders + {n:,} prices changed": lambda: {
                 "prices": prices(rng.choice(size, min(n, size), replace=False)),
                 "orders": orders(n)}}
    results, where = [], []
    for kind, make in kinds.items():
        t = Timings()
        for _ in range(args.repeats):
            batch = make()
            upsert = "prices" in batch  # a changed price replaces its item's
            epoch(db, "temporal", batch, t, args.profile, "upsert" if upsert else "insert")
            t.applied.append(apply_seconds(plain, batch, replace=upsert))
            t.recompute.append(lookup(batch))
            t.full.append(recompute_seconds(plain, LOOKUP.format(orders="orders")))
        inc, full = statistics.median(t.ivm), statistics.median(t.full)
        results.append((f"{size:,}", kind, ms(t.ivm), ms(t.recompute),
                        f"{statistics.median(t.recompute) / inc:.2f}x", ms(t.full),
                        f"{full / inc:.1f}x", f"{statistics.median(t.moved):,.0f}"))
        where += where_rows(name, kind, t)
        report(console, name, kind, t, args.profile)
        if args.plans:
            batch = make()
            upsert = "prices" in batch
            plan_epoch(console, db, name, kind, batch, "upsert" if upsert else "insert")
            apply_seconds(plain, batch, replace=upsert)
            lookup(batch)
    problem = difference(db.read("temporal"), plain.sql("SELECT * FROM expected").to_arrow_table())
    assert problem is None, f"{name} differs from the batches joined as they arrived: {problem}"
    console.print(f"{name}: equals the batches joined with prices as they arrived")
    db.close()
    plain.close()
    return results, where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trades", type=int, help="default: 1000000 (--quick: 20000)")
    parser.add_argument("--quotes", type=int, help="default: 1000000 (--quick: 20000)")
    parser.add_argument("--symbols", type=int, help="default: 1000 (--quick: 100)")
    parser.add_argument("--batch", type=int, default=1000, help="rows of each kind per batch")
    parser.add_argument("--repeats", type=int, help="default: 5 (--quick: 3)")
    parser.add_argument("--views", default="asof,temporal",
                        help=f"comma-separated, of: {', '.join(VIEWS)}, temporal")
    parser.add_argument("--prices", help="temporal: sizes of prices, comma-separated; "
                        "default: 10000,100000,1000000 (--quick: 1000,10000)")
    parser.add_argument("--orders", type=int, help="temporal: first orders; default: 100000 "
                        "(--quick: 10000)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: 20k trades and quotes, 100 symbols, 3 repeats "
                             "unless given")
    parser.add_argument("--profile", action="store_true",
                        help="print explain(analyze=True) of each kind's slowest epoch")
    parser.add_argument("--plans", action="store_true",
                        help="after each kind's epochs, one more (untimed) whose statements "
                             "DuckDB profiles: their costliest operators")
    args = parser.parse_args()
    args.trades = args.trades or (20_000 if args.quick else 1_000_000)
    args.quotes = args.quotes or (20_000 if args.quick else 1_000_000)
    args.symbols = args.symbols or (100 if args.quick else 1000)
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.prices = [int(p) for p in (args.prices or ("1000,10000" if args.quick else
                                                    "10000,100000,1000000")).split(",")]
    args.orders = args.orders or (10_000 if args.quick else 100_000)
    names = args.views.split(",")
    if unknown := [n for n in names if n not in [*VIEWS, "temporal"]]:
        parser.error(f"unknown views {unknown}; choose from {[*VIEWS, 'temporal']}")
    console = Console(width=None if sys.stdout.isatty() else 140)
    results, where, temporal = [], [], []
    for name in names:
        for size in args.prices if name == "temporal" else [0]:
            timed, spent = (run_temporal(console, size, args) if name == "temporal"
                            else run_view(console, name, args))
            (temporal if name == "temporal" else results).extend(timed)
            where += spent

    if results:
        print_table(console, f"ivm vs recompute: {args.trades:,} trades ASOF {args.quotes:,} "
                    f"quotes, {args.symbols:,} symbols, median of {args.repeats} epochs",
                    ["view", "batch", "ivm (ms)", "slowest (ms)", "recompute (ms)", "speed-up",
                     "vs apply + recompute", "view rows moved"], results, 2)
    if temporal:
        print_table(console, f"temporal join: ivm's epoch as prices grow ({args.orders:,} first "
                    f"orders), median of {args.repeats}", ["prices", "batch", "ivm (ms)",
                    "DuckDB: batch ⋈ prices (ms)", "÷ ivm", "DuckDB: all orders ⋈ prices (ms)",
                    "÷ ivm", "view rows moved"], temporal, 2)
    print_table(console, "where ivm's epoch goes (medians): phases, then each statement an "
                "operator materialized", ["view", "batch", "phase / statement", "ms", "rows"],
                where, 3)


if __name__ == "__main__":
    main()
