"""Soak: many epochs over persistent state, with a close and reopen every so often.

5 tables and 19 views covering every operator family of the README's table
(``soak_workload``: invertible, running, per-key and factorized aggregates; inner, outer,
3-way, cyclic (worst-case-optimal), ASOF and temporal joins; EXISTS and NOT IN; EXCEPT;
top-k; windows with QUALIFY, DISTINCT ON; a recursive view, UNNEST, PIVOT, ROLLUP, a view
over a view). Epoch 1 loads the tables; every later epoch changes orders by one of the
mixed batch sizes (equal shares inserted, updated and deleted, so the live data keeps
its size), and a few rows of every other table. Every ``--reopen-every`` epochs the
session is closed and reopened, and every table and view is checked against DuckDB
recomputing it over an independent copy of the tables (``soak_oracle``); also at the
end. Printed per reopen: throughput (changed rows per second of ``ingest``), the median
epoch time of the stretch (wall and CPU: the process's CPU seconds, which other jobs on
the machine change little), the resident set of the process tree and the state's bytes
on disk (the directory after ``close``; beside it, the bytes of the DuckDB file in free
blocks, which DuckDB reuses but gives back only at the file's end, and ``db.stats()``'s
estimate of trace bytes). At the end: the state against a fresh load of the same live
data (a new state, the same views, the live rows in one epoch but one order, closed),
epoch times of the first and last stretches, RSS growth after warm-up (from the first
reopen on), and where the memory is (``soak_memory``: sampled after every epoch and
around every reopen, ``--samples FILE`` writes them all as CSV).

``--spark`` runs the same soak in Spark mode (``local[2]``, ``--partitions`` partitions;
defaults: 150 epochs, a reopen every 50, 50k orders).

    .venv/bin/python benchmarks/bench_soak.py [--epochs 1000] [--reopen-every 100]
        [--orders 200000] [--state DIR] [--samples FILE] [--tracemalloc]
    .venv/bin/python benchmarks/bench_soak.py --spark [--partitions 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak_memory import Sampler, growth_table, tree_rss
from soak_oracle import Oracle, check_exact
from soak_workload import COLUMNS, DDL, VIEWS, Scale, Workload, changed_rows

import ivm


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
    cpu_seconds: list[float] = field(default_factory=list)
    """Each epoch's CPU seconds (the process's, DuckDB's threads included): unlike its wall
    time, about the same on a machine other jobs share."""


@dataclass
class SoakResult:
    """What a soak run measured."""

    stretches: list[Stretch] = field(default_factory=list)
    load_seconds: float = 0.0
    fresh_bytes: int = 0
    fresh_free_bytes: int = 0
    sampler: Sampler | None = None
    oracle: Oracle | None = None

    @property
    def final_bytes(self) -> int:
        """The state's bytes at the last reopen."""
        return self.stretches[-1].state_bytes


@dataclass(frozen=True)
class Mode:
    """How sessions are opened: embedded (``spark`` None) or Spark mode."""

    spark: Any = None
    partitions: int = 2

    def connect(self, state: Path) -> ivm.Session:
        """A session over ``state``."""
        if self.spark is None:
            return ivm.connect(str(state))
        return ivm.connect(str(state), spark=self.spark, partitions=self.partitions)


def trace_bytes(db: ivm.Session) -> int:
    """``db.stats()``'s estimate of every table's and view's trace bytes."""
    return sum(s.state_bytes for s in db.stats().values())


def database_file_bytes(state: Path) -> int:
    """The bytes of the state's DuckDB file (embedded mode's one file)."""
    return sum(p.stat().st_size for p in state.glob("*.duckdb"))


def free_bytes(db: ivm.Session, file_bytes: int, mode: Mode) -> int:
    """The bytes of the state's DuckDB file (``file_bytes`` at the close) not in a used
    block, just opened (the blocks as the close left them). Not DuckDB's free blocks: its
    count goes on holding the blocks past the end of a file it truncated. Embedded only
    (Spark mode's state is a file per partition and stage)."""
    if mode.spark is not None:
        return 0
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
    mode: Mode | None = None,
    samples: Path | None = None,
) -> SoakResult:
    """Run the soak in ``state`` (created), checking exactness at each reopen and the end;
    with ``fresh``, also measure a fresh load of the final live data. Memory is sampled
    after every epoch and around every reopen (``result.sampler``; as CSV to ``samples``)."""
    mode = mode or Mode()
    workload, oracle = Workload(scale, seed), Oracle()
    result = SoakResult(oracle=oracle)
    started = time.perf_counter()
    sampler = result.sampler = Sampler(samples, oracle.con, started)
    db = mode.connect(state)
    db.execute(DDL + ";".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
    start = time.perf_counter()
    first = workload.first()
    db.ingest(first)
    result.load_seconds = time.perf_counter() - start
    oracle.apply(first)
    seconds: list[float] = []
    cpu: list[float] = []
    rows = 0
    for epoch in range(2, epochs + 1):
        batches = workload.next()
        start, cpu_start = time.perf_counter(), time.process_time()
        db.ingest(batches)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
        rows += changed_rows(batches)
        oracle.apply(batches)
        sampler.take(db, epoch, "epoch", time.perf_counter())
        if epoch % reopen_every == 0 or epoch == epochs:
            db.close()
            sampler.take(None, epoch, "closed", time.perf_counter())
            stretch = Stretch(epoch, seconds, rows, 0, directory_bytes(state), 0, 0, cpu)
            file_bytes = database_file_bytes(state)
            db = mode.connect(state)
            sampler.take(db, epoch, "reopened", time.perf_counter())
            assert db.epoch == epoch, (db.epoch, epoch)
            check_exact(db, oracle, f"reopened at epoch {epoch}")
            stretch.rss = sampler.take(db, epoch, "checked", time.perf_counter()).rss
            stretch.trace_bytes = trace_bytes(db)
            stretch.free_bytes = free_bytes(db, file_bytes, mode)
            result.stretches.append(stretch)
            if report:
                report(stretch)
            seconds, cpu, rows = [], [], 0
    db.close()
    sampler.close()
    if fresh:
        result.fresh_bytes, result.fresh_free_bytes = fresh_load_bytes(
            state.parent / "fresh", oracle, mode
        )
    return result


def fresh_load_bytes(state: Path, oracle: Oracle, mode: Mode) -> tuple[int, int]:
    """The bytes of a new state holding the oracle's live rows, closed, and of its DuckDB
    file's free blocks. The rows go in one epoch but for one order, inserted by a second:
    the in-memory indexes an operator builds at its first change (the ASOF join's time
    indexes, 6.4 MB of the 1,000-epoch soak's saved indexes) are then saved beside the
    fresh state as they are beside the soak's, as they would be after any epoch."""
    shutil.rmtree(state, ignore_errors=True)
    live = {name: oracle.table(name) for name in COLUMNS}
    orders = live["orders"]
    with mode.connect(state) as db:
        db.execute(DDL + ";".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
        db.ingest({**live, "orders": orders.slice(0, orders.num_rows - 1)})
        db.ingest({"orders": orders.slice(orders.num_rows - 1)})
    closed, file_bytes = directory_bytes(state), database_file_bytes(state)
    with mode.connect(state) as db:
        return closed, free_bytes(db, file_bytes, mode)


def spark_session(partitions: int) -> Any:
    """A local Spark (``local[2]``) as the tests start it: C1-compiled, serial GC, Python
    workers over Unix domain sockets (docs/spark.md)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").appName("ivm-bench-soak")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.python.unix.domain.socket.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _mb(count: int) -> str:
    return f"{count / 2**20:,.1f} MB"


def per_1k(stretch: Stretch) -> float:
    """The stretch's CPU milliseconds per thousand changed rows: the epochs' batch sizes
    are drawn, so a stretch's median epoch moves with its draws; this does not."""
    return sum(stretch.cpu_seconds) * 1e6 / max(stretch.rows, 1)


def summary(result: SoakResult, wall: float) -> list[str]:
    """The closing lines: totals, the first and last stretches' epoch times, RSS after
    warm-up, the state against the fresh load."""
    stretches = result.stretches
    total_rows = sum(s.rows for s in stretches)
    total_seconds = sum(sum(s.seconds) for s in stretches)
    first, last = stretches[0], stretches[-1]
    warm = [s.rss for s in stretches]
    lines = [
        f"load (epoch 1): {result.load_seconds:.1f} s",
        f"changed rows after the load: {total_rows:,} in {total_seconds:.1f} s of ingest "
        f"({total_rows / total_seconds:,.0f} rows/s); wall {wall:.0f} s",
        f"epoch median: first stretch {statistics.median(first.seconds) * 1000:.1f} ms, "
        f"last {statistics.median(last.seconds) * 1000:.1f} ms "
        f"({statistics.median(last.seconds) / statistics.median(first.seconds):.2f}x); "
        f"CPU {statistics.median(first.cpu_seconds) * 1000:.1f} ms, last "
        f"{statistics.median(last.cpu_seconds) * 1000:.1f} ms "
        f"({statistics.median(last.cpu_seconds) / statistics.median(first.cpu_seconds):.2f}x); "
        f"CPU per 1k changed rows: first {per_1k(first):.0f} ms, last {per_1k(last):.0f} ms "
        f"({per_1k(last) / per_1k(first):.2f}x)",
        f"RSS after warm-up: {_mb(warm[0])} -> {_mb(warm[-1])} (max {_mb(max(warm))}, "
        f"{max(warm) / warm[0]:.2f}x)",
    ]
    if result.fresh_bytes:
        lines.append(
            f"state: {_mb(result.final_bytes)} against a fresh load of the same live data "
            f"{_mb(result.fresh_bytes)} ({result.final_bytes / result.fresh_bytes:.2f}x); "
            f"free blocks {_mb(last.free_bytes)} against {_mb(result.fresh_free_bytes)}")
    if result.sampler and result.sampler.samples:
        every = max(1, stretches[0].last_epoch // 2)
        epoch_rss = [s.rss for s in result.sampler.samples
                     if s.phase == "epoch" and s.epoch >= stretches[0].last_epoch]
        lines.append(f"RSS after each epoch from the first reopen on: min {_mb(min(epoch_rss))}"
                     f", max {_mb(max(epoch_rss))}; the parts (MB) after the epochs:")
        lines += growth_table(result.sampler.samples, "epoch", every)
    return lines


def python_growth(snapshots: list[tracemalloc.Snapshot], top: int = 8) -> list[str]:
    """Python's allocations that grew most since the first call (its snapshot kept in
    ``snapshots``), by the line that allocated them."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)])
    snapshots.append(snapshot)
    if len(snapshots) == 1:
        return [f"  python traced: {_mb(tracemalloc.get_traced_memory()[0])}"]
    grown = snapshot.compare_to(snapshots[0], "traceback")[:top]
    lines = [f"  python traced: {_mb(tracemalloc.get_traced_memory()[0])}; grown most:"]
    for stat in grown:
        frames = " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in stat.traceback[:4])
        lines.append(f"    {stat.size_diff / 2**20:+8.2f} MB {stat.count_diff:+8d} blocks {frames}")
    return lines


def main() -> None:
    """Run the soak from the command line and print its numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--reopen-every", type=int)
    parser.add_argument("--orders", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state", help="a directory to keep the state in (default: a temp dir)")
    parser.add_argument("--samples", help="write every memory sample to this CSV file")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="trace Python's allocations (slower): exact Python bytes")
    parser.add_argument("--spark", action="store_true", help="Spark mode (local[2])")
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()
    spark = args.spark
    epochs = args.epochs or (150 if spark else 1000)
    reopen_every = args.reopen_every or (50 if spark else 100)
    scale = Scale(orders=args.orders or (50_000 if spark else Scale.orders))
    base = Path(args.state) if args.state else Path(tempfile.mkdtemp(prefix="ivm-soak-"))
    shutil.rmtree(base / "state", ignore_errors=True)
    base.mkdir(parents=True, exist_ok=True)
    snapshots: list[tracemalloc.Snapshot] = []
    if args.tracemalloc:
        tracemalloc.start(8)
    mode = Mode(spark_session(args.partitions), args.partitions) if spark else Mode()
    print(f"soak ({'Spark mode, ' + str(args.partitions) + ' partitions' if spark else 'embedded'})"
          f": {epochs} epochs, reopen every {reopen_every}, {len(VIEWS)} views, {scale}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)

    def report(s: Stretch) -> None:
        print(f"epoch {s.last_epoch:5d}: {s.rows / sum(s.seconds):9,.0f} rows/s, epoch median "
              f"{statistics.median(s.seconds) * 1000:7.1f} ms (max {max(s.seconds) * 1000:.0f}; "
              f"CPU {statistics.median(s.cpu_seconds) * 1000:.1f} ms, {per_1k(s):.0f} ms per 1k "
              f"rows), "
              f"RSS {_mb(s.rss)}, state {_mb(s.state_bytes)} ({_mb(s.free_bytes)} free, "
              f"traces {_mb(s.trace_bytes)}), "
              f"exact; load average {os.getloadavg()[0]:.1f}", flush=True)
        if tracemalloc.is_tracing():
            print("\n".join(python_growth(snapshots)), flush=True)

    started = time.perf_counter()
    samples = Path(args.samples) if args.samples else None
    result = soak(base / "state", epochs, reopen_every, scale, args.seed, report, mode=mode,
                  samples=samples)
    print("\n".join(summary(result, time.perf_counter() - started)))
    print(f"RSS of the process tree at the end: {_mb(tree_rss())}")
    if not args.state:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
