"""Benchmark: a job that opens persistent state, ingests one batch and closes, each time.

Many pipelines run this way (a scheduled task per batch), so each epoch is the first of
its session: whatever ivm keeps in memory (the base tables' row indexes, an ASOF join's
time indexes) was built from the traces at first use, O(table), until sessions saved it
at close for the next open (``ivm.storage.snapshots``). Measured, over the market of
``bench_asof`` (1M trades, 1M quotes, 1,000 symbols, an ASOF JOIN view) in state on
disk, for ``--repeats`` batches of ``--batch`` late quotes:

* *with snapshot*: ``ivm.connect(path)``, ``ingest``, ``close`` (the snapshot taken back
  at open, saved again at close);
* *without snapshot*: the same with the snapshot removed before each open (what every
  such job paid before);
* *kept open*: the same batches into the session left open (the in-memory epoch);

each against DuckDB recomputing the view over plain tables holding the same rows (in the
same process). Printed: medians per step (open, ingest, close), ratios recompute / ivm
(never asserted); at the end the view must equal recomputation.

    .venv/bin/python benchmarks/bench_reopen.py [--trades 1000000] [--quotes 1000000]
        [--symbols 1000] [--batch 1000] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
from bench_aggregate import difference
from bench_asof import DDL, LOADED, SEED, VIEWS, Market, apply_seconds, recompute_seconds
from rich.console import Console
from rich.table import Table

import ivm
from ivm.storage.snapshots import snapshot_dir
from ivm.views.state_file import STATE_FILE

STEPS = ("open", "ingest", "close")


def timed_job(path: Path, batch: dict, snapshot: bool) -> dict[str, float]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trades", type=int, help="default: 1000000 (--quick: 20000)")
    parser.add_argument("--quotes", type=int, help="default: 1000000 (--quick: 20000)")
    parser.add_argument("--symbols", type=int, help="default: 1000 (--quick: 100)")
    parser.add_argument("--batch", type=int, default=1000, help="late quotes per batch")
    parser.add_argument("--repeats", type=int, help="default: 5 (--quick: 3)")
    parser.add_argument("--quick", action="store_true", help="a small market, for a smoke run")
    args = parser.parse_args()
    quick = args.quick
    trades = args.trades or (20_000 if quick else 1_000_000)
    quotes = args.quotes or (20_000 if quick else 1_000_000)
    symbols = args.symbols or (100 if quick else 1_000)
    repeats = args.repeats or (3 if quick else 5)
    console = Console(width=150)

    market = Market(symbols, np.random.default_rng(SEED))
    first = {"trades": market.trades(trades, 0, LOADED), "quotes": market.quotes(quotes)}
    plain = duckdb.connect()
    plain.execute(DDL)
    apply_seconds(plain, first)
    sql = VIEWS["asof"]
    root = Path(tempfile.mkdtemp(prefix="bench_reopen_"))
    path = root / "state"
    try:
        with ivm.connect(path) as db:
            db.execute(f"{DDL}; CREATE VIEW asof AS {sql}")
            db.ingest(first)
            warm = {"quotes": market.quotes(args.batch)}
            db.ingest(warm)  # the indexes built, saved at close
            apply_seconds(plain, warm)
        results: list[tuple[str, dict[str, list[float]], list[float]]] = []

        def run(label: str, job: Callable[[dict], dict[str, float]]) -> None:
            steps: dict[str, list[float]] = {s: [] for s in STEPS}
            recompute = []
            for _ in range(repeats):
                batch = {"quotes": market.quotes(args.batch)}
                for step, seconds in job(batch).items():
                    steps[step].append(seconds)
                apply_seconds(plain, batch)
                recompute.append(recompute_seconds(plain, sql))
            results.append((label, steps, recompute))

        run("with snapshot (open, ingest, close)", lambda b: timed_job(path, b, True))
        run("without snapshot (open, ingest, close)", lambda b: timed_job(path, b, False))
        kept = ivm.connect(path)
        warm = {"quotes": market.quotes(args.batch)}
        kept.ingest(warm)  # its indexes: in memory now
        apply_seconds(plain, warm)

        def in_session(batch: dict) -> dict[str, float]:
            start = time.perf_counter()
            kept.ingest(batch)
            return {"ingest": time.perf_counter() - start}

        run("kept open (ingest only)", in_session)
        problem = difference(kept.read("asof"), plain.sql(sql).to_arrow_table())
        kept.close()
        assert problem is None, f"the view differs from recomputation: {problem}"
    finally:
        shutil.rmtree(root, ignore_errors=True)

    table = Table(title=f"a job per batch of {args.batch:,} late quotes: {trades:,} trades ASOF "
                        f"{quotes:,} quotes in state on disk, median of {repeats}")
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
    console.print("the view equals recomputation after the run")


if __name__ == "__main__":
    main()
