"""Soak: many epochs over persistent state, with a close and reopen every so often.

5 tables and 10 views across the operator families (``soak_workload``: GROUP BY
SUM/COUNT/AVG, MIN/MAX with COUNT(DISTINCT), an inner, an outer and a 3-way join, EXCEPT,
top-k, EXISTS, a recursive view, an ASOF join). Epoch 1 loads the tables; every later
epoch changes orders by one of the mixed batch sizes (equal shares inserted, updated and
deleted, so the live data keeps its size), and a few rows of every other table. Every
``--reopen-every`` epochs the session is closed and reopened, and every table and view
is checked against DuckDB recomputing it over an independent copy of the tables (the
oracle); also at the end. Printed per reopen: throughput (changed rows per second of
``ingest``), the median epoch time of the stretch, the process's RSS and the state's
bytes on disk (the directory after ``close``; beside it, the bytes of the DuckDB file in
free blocks, which DuckDB reuses but gives back only at the file's end, and
``db.stats()``'s estimate of trace bytes). At the end: the state against a fresh load of
the same live data (a new state, the same views, the live rows in one epoch but one
order, closed), epoch times of the first and last stretches, RSS growth after warm-up
(from the first reopen on).

    .venv/bin/python benchmarks/bench_soak.py [--epochs 1000] [--reopen-every 100]
        [--orders 200000] [--state DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from soak_workload import COLUMNS, DDL, VIEWS, Oracle, Scale, Workload, changed_rows, check_exact

import ivm


def rss_bytes() -> int:
    """The process's resident set now (not its peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def directory_bytes(directory: Path) -> int:
    """The bytes of every file under ``directory``."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


@dataclass
class Stretch:
    """The epochs between two reopens, and what was measured at the reopen ending them."""

    last_epoch: int
    seconds: list[float]
    rows: int
    rss: int
    state_bytes: int
    trace_bytes: int
    free_bytes: int = 0


@dataclass
class SoakResult:
    """What a soak run measured."""

    stretches: list[Stretch] = field(default_factory=list)
    load_seconds: float = 0.0
    fresh_bytes: int = 0
    fresh_free_bytes: int = 0

    @property
    def final_bytes(self) -> int:
        """The state's bytes at the last reopen."""
        return self.stretches[-1].state_bytes


def trace_bytes(db: ivm.Session) -> int:
    """``db.stats()``'s estimate of every table's and view's trace bytes."""
    return sum(s.state_bytes for s in db.stats().values())


def database_file_bytes(state: Path) -> int:
    """The bytes of the state's DuckDB file."""
    return sum(p.stat().st_size for p in state.glob("*.duckdb"))


def free_bytes(db: ivm.Session, file_bytes: int) -> int:
    """The bytes of the state's DuckDB file (``file_bytes`` at the close) not in a used
    block, just opened (the blocks as the close left them). Not DuckDB's free blocks: its
    count goes on holding the blocks past the end of a file it truncated."""
    sizes = db.sql(
        "SELECT (total_blocks - free_blocks) * block_size AS used FROM pragma_database_size()"
    )
    return max(0, file_bytes - int(sizes.column("used")[0].as_py()))


def soak(
    state: Path,
    epochs: int,
    reopen_every: int,
    scale: Scale,
    seed: int = 0,
    report: Callable[[Stretch], None] | None = None,
    fresh: bool = True,
) -> SoakResult:
    """Run the soak in ``state`` (created), checking exactness at each reopen and the end;
    with ``fresh``, also measure a fresh load of the final live data."""
    workload, oracle, result = Workload(scale, seed), Oracle(), SoakResult()
    db = ivm.connect(str(state))
    db.execute(DDL + ";".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
    start = time.perf_counter()
    first = workload.first()
    db.ingest(first)
    result.load_seconds = time.perf_counter() - start
    oracle.apply(first)
    seconds: list[float] = []
    rows = 0
    for epoch in range(2, epochs + 1):
        batches = workload.next()
        start = time.perf_counter()
        db.ingest(batches)
        seconds.append(time.perf_counter() - start)
        rows += changed_rows(batches)
        oracle.apply(batches)
        if epoch % reopen_every == 0 or epoch == epochs:
            db.close()
            stretch = Stretch(epoch, seconds, rows, 0, directory_bytes(state), 0)
            file_bytes = database_file_bytes(state)
            db = ivm.connect(str(state))
            assert db.epoch == epoch, (db.epoch, epoch)
            check_exact(db, oracle, f"reopened at epoch {epoch}")
            stretch.rss, stretch.trace_bytes = rss_bytes(), trace_bytes(db)
            stretch.free_bytes = free_bytes(db, file_bytes)
            result.stretches.append(stretch)
            if report:
                report(stretch)
            seconds, rows = [], 0
    db.close()
    if fresh:
        result.fresh_bytes, result.fresh_free_bytes = fresh_load_bytes(
            state.parent / "fresh", oracle
        )
    return result


def fresh_load_bytes(state: Path, oracle: Oracle) -> tuple[int, int]:
    """The bytes of a new state holding the oracle's live rows, closed, and of its DuckDB
    file's free blocks. The rows go in one epoch but for one order, inserted by a second:
    the in-memory indexes an operator builds at its first change (the ASOF join's time
    indexes, 6.4 MB of the 1,000-epoch soak's saved indexes) are then saved beside the
    fresh state as they are beside the soak's, as they would be after any epoch."""
    shutil.rmtree(state, ignore_errors=True)
    live = {name: oracle.table(name) for name in COLUMNS}
    orders = live["orders"]
    with ivm.connect(str(state)) as db:
        db.execute(DDL + ";".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
        db.ingest({**live, "orders": orders.slice(0, orders.num_rows - 1)})
        db.ingest({"orders": orders.slice(orders.num_rows - 1)})
    closed, file_bytes = directory_bytes(state), database_file_bytes(state)
    with ivm.connect(str(state)) as db:
        return closed, free_bytes(db, file_bytes)


def _mb(count: int) -> str:
    return f"{count / 2**20:,.1f} MB"


def main() -> None:
    """Run the soak from the command line and print its numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--reopen-every", type=int, default=100)
    parser.add_argument("--orders", type=int, default=Scale.orders)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state", help="a directory to keep the state in (default: a temp dir)")
    args = parser.parse_args()
    base = Path(args.state) if args.state else Path(tempfile.mkdtemp(prefix="ivm-soak-"))
    shutil.rmtree(base / "state", ignore_errors=True)
    base.mkdir(parents=True, exist_ok=True)
    scale = Scale(orders=args.orders)
    print(f"soak: {args.epochs} epochs, reopen every {args.reopen_every}, {scale}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)

    def report(s: Stretch) -> None:
        print(f"epoch {s.last_epoch:5d}: {s.rows / sum(s.seconds):9,.0f} rows/s, epoch median "
              f"{statistics.median(s.seconds) * 1000:7.1f} ms (max {max(s.seconds) * 1000:.0f}), "
              f"RSS {_mb(s.rss)}, state {_mb(s.state_bytes)} ({_mb(s.free_bytes)} free, "
              f"traces {_mb(s.trace_bytes)}), "
              f"exact; load average {os.getloadavg()[0]:.1f}", flush=True)

    started = time.perf_counter()
    result = soak(base / "state", args.epochs, args.reopen_every, scale, args.seed, report)
    stretches = result.stretches
    total_rows = sum(s.rows for s in stretches)
    total_seconds = sum(sum(s.seconds) for s in stretches)
    first, last = stretches[0], stretches[-1]
    warm = [s.rss for s in stretches]
    print(f"load (epoch 1): {result.load_seconds:.1f} s")
    print(f"changed rows after the load: {total_rows:,} in {total_seconds:.1f} s of ingest "
          f"({total_rows / total_seconds:,.0f} rows/s); wall {time.perf_counter() - started:.0f} s")
    print(f"epoch median: first stretch {statistics.median(first.seconds) * 1000:.1f} ms, "
          f"last {statistics.median(last.seconds) * 1000:.1f} ms "
          f"({statistics.median(last.seconds) / statistics.median(first.seconds):.2f}x)")
    print(f"RSS after warm-up: {_mb(warm[0])} -> {_mb(warm[-1])} (max {_mb(max(warm))}, "
          f"{max(warm) / warm[0]:.2f}x)")
    print(f"state: {_mb(result.final_bytes)} against a fresh load of the same live data "
          f"{_mb(result.fresh_bytes)} ({result.final_bytes / result.fresh_bytes:.2f}x); "
          f"free blocks {_mb(last.free_bytes)} against {_mb(result.fresh_free_bytes)}")
    if not args.state:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
