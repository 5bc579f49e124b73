"""Benchmark: a job that opens persistent state, ingests one batch and closes, each time.

Many pipelines run this way (a scheduled task per batch), so each epoch is the first of
its session: whatever ivm keeps in memory (the base tables' row indexes, an ASOF join's
time indexes) was built from the traces at first use, O(table), until sessions saved it
at close for the next open (``ivm.storage.snapshots``). Two markets, in state on disk:

* ``asof``: ``bench_asof``'s (1M trades, 1M quotes, 1,000 symbols, the ASOF JOIN view),
  batches of ``--batch`` late quotes;
* ``aggregate``: ``bench_aggregate``'s ``decimal`` workload (1M orders, 50k customers,
  ``by_customer`` and ``by_region``), batches of ``--batch`` changed orders (half new,
  30 % updated, 20 % deleted).

For ``--repeats`` batches each way:

* *with snapshot*: ``ivm.connect(path)``, ``ingest``, ``close`` (the snapshot taken back
  at open, saved again at close);
* *without snapshot*: the same with the snapshot removed before each open (what every
  such job paid before);
* *kept open*: the same batches into the session left open (the in-memory epoch);

each against DuckDB recomputing the views over plain tables holding the same rows (in
the same process). Printed: medians per step (open, ingest, close), ratios recompute /
ivm (never asserted); at the end the views must equal recomputation.

    .venv/bin/python benchmarks/bench_reopen.py [--markets asof,aggregate] [--batch 1000]
        [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from bench_aggregate import DDL as AGGREGATE_DDL
from bench_aggregate import WORKLOADS, Workload, apply_to_plain, difference
from bench_asof import DDL, LOADED, SEED, VIEWS, Market, apply_seconds
from rich.console import Console
from rich.table import Table

import ivm
from ivm.storage.snapshots import snapshot_dir
from ivm.views.state_file import STATE_FILE

STEPS = ("open", "ingest", "close")
Batch = dict[str, pa.Table]


@dataclass
class Scenario:
    """A market: its DDL and views, its first data, and how batches are made and applied to
    the plain tables of the baseline."""

    title: str
    ddl: str
    views: dict[str, str]
    first: Batch
    next_batch: Callable[[], Batch]
    apply: Callable[[duckdb.DuckDBPyConnection, Batch], Any]


def asof_market(batch: int, quick: bool) -> Scenario:
    size, symbols = (20_000, 100) if quick else (1_000_000, 1_000)
    market = Market(symbols, np.random.default_rng(SEED))
    return Scenario(
        f"{size:,} trades ASOF {size:,} quotes, {batch:,} late quotes a batch", DDL,
        {"asof_prices": VIEWS["asof"]},
        {"trades": market.trades(size, 0, LOADED), "quotes": market.quotes(size)},
        lambda: {"quotes": market.quotes(batch)}, apply_seconds)


def aggregate_market(batch: int, quick: bool) -> Scenario:
    spec = WORKLOADS["decimal"]
    rows, customers = (20_000, 1_000) if quick else (1_000_000, 50_000)
    workload = Workload(spec, rows, customers)
    return Scenario(
        f"{rows:,} orders by customer and by region, {batch:,} changed orders a batch",
        AGGREGATE_DDL.format(amount=spec.amount_type), dict(spec.views),
        {"customers": workload.customer_table(), "orders": workload.live},
        lambda: {"orders": workload.batch(batch)},
        lambda con, b: apply_to_plain(con, b["orders"]) if "orders" in b else None)


MARKETS = {"asof": asof_market, "aggregate": aggregate_market}


def timed_job(path: Path, batch: Batch, snapshot: bool) -> dict[str, float]:
    """One job: open the state, ingest ``batch``, close; seconds per step."""
    if not snapshot:
        shutil.rmtree(snapshot_dir(path / STATE_FILE), ignore_errors=True)
    start = time.perf_counter()
    db = ivm.connect(path)
    opened = time.perf_counter()
    db.ingest(batch)
    ingested = time.perf_counter()
    db.close()
    closed = time.perf_counter()
    return {"open": opened - start, "ingest": ingested - opened, "close": closed - ingested}


def recompute_seconds(plain: duckdb.DuckDBPyConnection, views: dict[str, str]) -> float:
    start = time.perf_counter()
    for name, sql in views.items():
        plain.execute(f"CREATE OR REPLACE TABLE recomputed_{name} AS {sql}")
    return time.perf_counter() - start


Result = tuple[str, dict[str, list[float]], list[float]]


def run_market(scenario: Scenario, repeats: int, root: Path) -> list[Result]:
    """Time the three ways of ingesting ``repeats`` batches each (module docstring)."""
    plain = duckdb.connect()
    plain.execute(scenario.ddl)
    apply_seconds(plain, scenario.first)
    path = root / "state"
    with ivm.connect(path) as db:
        db.execute(scenario.ddl + "".join(f"; CREATE VIEW {n} AS {sql}"
                                          for n, sql in scenario.views.items()))
        db.ingest(scenario.first)
        warm = scenario.next_batch()
        db.ingest(warm)  # the indexes built, saved at close
        scenario.apply(plain, warm)
    results: list[Result] = []

    def run(label: str, job: Callable[[Batch], dict[str, float]]) -> None:
        steps: dict[str, list[float]] = {s: [] for s in STEPS}
        recompute = []
        for _ in range(repeats):
            batch = scenario.next_batch()
            for step, seconds in job(batch).items():
                steps[step].append(seconds)
            scenario.apply(plain, batch)
            recompute.append(recompute_seconds(plain, scenario.views))
        results.append((label, steps, recompute))

    run("with snapshot (open, ingest, close)", lambda b: timed_job(path, b, True))
    run("without snapshot (open, ingest, close)", lambda b: timed_job(path, b, False))
    kept = ivm.connect(path)
    warm = scenario.next_batch()
    kept.ingest(warm)  # its indexes: in memory now
    scenario.apply(plain, warm)

    def in_session(batch: Batch) -> dict[str, float]:
        start = time.perf_counter()
        kept.ingest(batch)
        return {"ingest": time.perf_counter() - start}

    run("kept open (ingest only)", in_session)
    for name, sql in scenario.views.items():
        problem = difference(kept.read(name), plain.sql(sql).to_arrow_table())
        assert problem is None, f"{name} differs from recomputation: {problem}"
    kept.close()
    plain.close()
    return results


def print_results(console: Console, title: str, results: list[Result]) -> None:
    table = Table(title=title)
    for column in ("job", *(f"{s} (ms)" for s in STEPS), "total (ms)", "recompute (ms)",
                   "speed-up"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for label, steps, recompute in results:
        medians = {s: statistics.median(v) for s, v in steps.items() if v}
        total = statistics.median([sum(parts) for parts in zip(
            *(steps[s] for s in medians), strict=True)])
        rec = statistics.median(recompute)
        table.add_row(label, *(f"{medians[s] * 1000:,.1f}" if s in medians else "" for s in STEPS),
                      f"{total * 1000:,.1f}", f"{rec * 1000:,.1f}", f"{rec / total:.1f}x")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markets", default="asof,aggregate", help="comma-separated")
    parser.add_argument("--batch", type=int, default=1000, help="changed rows per batch")
    parser.add_argument("--repeats", type=int, help="default: 5 (--quick: 3)")
    parser.add_argument("--quick", action="store_true", help="small markets, for a smoke run")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    console = Console(width=150)
    for name in args.markets.split(","):
        scenario = MARKETS[name](args.batch, args.quick)
        root = Path(tempfile.mkdtemp(prefix="bench_reopen_"))
        try:
            results = run_market(scenario, repeats, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print_results(console, f"{name}: a job per batch, {scenario.title}, state on disk, "
                               f"median of {repeats}", results)
        console.print(f"{name}: the views equal recomputation after the run")


if __name__ == "__main__":
    main()
