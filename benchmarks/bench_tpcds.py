"""Benchmark: the 99 TPC-DS queries as incremental views, exact after random CDC epochs.

Data and queries come from ``tpcds_data.py`` beside this file (DuckDB's ``dsdgen`` at
``--sf``, 0.01 by default, generated offline on first use under
``benchmarks/.data/tpcds/``). Each query runs in a process of its own (a query that
runs away in time or memory is killed and reported, and the run goes on):

* the tables it reads are declared with their TPC-DS primary keys and loaded in one
  ``db.ingest`` (**ingest**);
* ``CREATE VIEW qNN AS <query>`` over them (**load**: ivm computes the view's contents
  and builds its state);
* ``--epochs`` epochs (**epoch**, each one ``db.ingest``): every table the query reads
  with at least 100 rows loses a random ``--fraction`` of its rows (half that for the
  dimension tables) and gets back the rows the epoch before took, so rows leave and
  re-enter the view;

and after the load and every epoch the view must equal DuckDB running the query over
a replica of the tables (a multiset; DOUBLE within relative 1e-9, see
``bench_tpch.difference``; where a LIMIT cuts through ties the replica breaks them as ivm
does, ``tpch_workload.tie_broken``).

Tally: **exact**; **refused** (``ivm.UnsupportedSQL``, by name); **wrong**; **error**
(any other exception, e.g. an internal one); **slow** (the load or an epoch took more
than ``--slow`` seconds, or the process was killed past ``--timeout`` seconds or
``--memory`` GB of resident memory).

    .venv/bin/python benchmarks/bench_tpcds.py [--only q09,q88] [--epochs 3] [--sf 0.01]

The last run's results are also written to ``benchmarks/.data/tpcds/last_run.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import sqlglot
from bench_tpch import difference
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlglot import exp
from tpcds_data import DATA_ROOT, folder
from tpch_workload import tie_broken

import ivm

FACTS = ("store_sales", "store_returns", "catalog_sales", "catalog_returns", "web_sales",
         "web_returns", "inventory")
SMALLEST_CHANGED = 100
"""Tables with fewer rows (one store, one call center…) are left as they are."""


@dataclass
class Outcome:
    """What happened to one query (the child process's answer, as JSON)."""

    name: str
    status: str = "error"  # exact | refused | wrong | error | slow
    note: str = ""
    ingest: float | None = None
    load: float | None = None
    epochs: list[float] = field(default_factory=list)
    rows: int | None = None
    peak_gb: float | None = None


# --- the child: one query -------------------------------------------------------------


def read_schema(data: Path) -> dict[str, tuple[str, list[str]]]:
    """``{table: (CREATE TABLE statement, primary key columns)}`` from ``schema.sql``."""
    found = {}
    for statement in (data / "schema.sql").read_text().split(";\n"):
        if not statement.strip():
            continue
        tree = sqlglot.parse_one(statement, read="duckdb")
        name = tree.find(exp.Table).name
        key = tree.find(exp.PrimaryKey)
        columns = [c.name for c in key.find_all(exp.Identifier)] if key else []
        found[name] = (statement.strip() + ";", columns)
    return found


def tables_of(sql: str, known: set[str]) -> list[str]:
    """The TPC-DS tables ``sql`` reads."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    return sorted({t.name.lower() for t in tree.find_all(exp.Table)} & known)


class Workload:
    """Random deletes and re-inserts of the tables a query reads, applied to ivm and to
    a DuckDB replica alike."""

    def __init__(self, tables: dict[str, pa.Table], fraction: float, seed: int) -> None:
        self.live = dict(tables)
        self.back: dict[str, pa.Table] = {}
        self.fraction = fraction
        self.rng = np.random.default_rng(seed)

    def next(self) -> dict[str, pa.Table]:
        """One epoch's batches (``__w`` -1 for deleted rows, +1 for re-inserted ones)."""
        batches, back = {}, {}
        for name, table in self.live.items():
            if table.num_rows < SMALLEST_CHANGED and name not in self.back:
                continue
            share = self.fraction if name in FACTS else self.fraction / 2
            count = max(1, round(table.num_rows * share))
            chosen = np.zeros(table.num_rows, dtype=bool)
            chosen[self.rng.choice(table.num_rows, size=count, replace=False)] = True
            gone = table.filter(pa.array(chosen))
            kept = table.filter(pa.array(~chosen))
            returning = self.back.get(name)
            parts = [gone.append_column("__w", pa.array(np.full(count, -1, dtype=np.int64)))]
            if returning is not None and returning.num_rows:
                ones = pa.array(np.ones(returning.num_rows, dtype=np.int64))
                parts.append(returning.append_column("__w", ones))
                kept = pa.concat_tables([kept, returning])
            batches[name] = pa.concat_tables(parts)
            self.live[name] = kept
            back[name] = gone
        self.back = back
        return batches


def apply_replica(
    replica: duckdb.DuckDBPyConnection, batches: dict[str, pa.Table], keys: dict[str, list[str]]
) -> None:
    """The batches applied to the replica's plain tables (by primary key)."""
    for name, batch in batches.items():
        replica.register("batch", batch)
        key = ", ".join(keys[name])
        replica.execute(f"DELETE FROM {name} WHERE ({key}) IN "
                        f"(SELECT ({key}) FROM batch WHERE __w < 0)")
        replica.execute(f"INSERT INTO {name} SELECT * EXCLUDE (__w) FROM batch WHERE __w > 0")
        replica.unregister("batch")


def first_line(error: BaseException) -> str:
    """The first line of an error's message."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def run_one(name: str, data: Path, epochs: int, fraction: float, seed: int,
            slow: float) -> Outcome:
    """Load, create, run and check one query's view (in this process)."""
    outcome = Outcome(name)
    sql = (data / "queries" / f"{name}.sql").read_text().strip().rstrip(";")
    schema = read_schema(data)
    names = tables_of(sql, set(schema))
    tables = {n: pq.read_table(data / "tables" / f"{n}.parquet") for n in names}
    db = ivm.connect()
    db.execute("\n".join(schema[n][0] for n in names))
    start = time.perf_counter()
    db.ingest(tables)
    outcome.ingest = time.perf_counter() - start
    replica = duckdb.connect()
    for n in names:
        replica.execute(schema[n][0])
        replica.register("source", tables[n])
        replica.execute(f"INSERT INTO {n} SELECT * FROM source")
        replica.unregister("source")
    try:
        reference = tie_broken(sql)
    except ValueError:
        reference = sql
    keys = {n: schema[n][1] for n in names}
    workload = Workload(tables, fraction, seed)
    problems: list[str] = []

    def check(when: str) -> None:
        expected = replica.sql(reference).to_arrow_table()
        problem = difference(db.read(name), expected)
        outcome.rows = expected.num_rows
        if problem:
            problems.append(f"{when}: {problem}")

    start = time.perf_counter()
    try:
        db.execute(f"CREATE VIEW {name} AS {sql}")
    except ivm.UnsupportedSQL as error:
        outcome.status, outcome.note = "refused", first_line(error)
        return outcome
    outcome.load = time.perf_counter() - start
    check("after the load")
    for number in range(1, epochs + 1):
        batches = workload.next()
        start = time.perf_counter()
        db.ingest(batches)
        outcome.epochs.append(time.perf_counter() - start)
        apply_replica(replica, batches, keys)
        check(f"after epoch {number}")
    slowest = max([outcome.load, *outcome.epochs])
    if problems:
        outcome.status, outcome.note = "wrong", "; ".join(problems)
    elif slowest > slow:
        outcome.status, outcome.note = "slow", f"slowest step {slowest:.1f} s"
    else:
        outcome.status = "exact"
    return outcome


def child(args: argparse.Namespace) -> None:
    """The child process: one query, its outcome as JSON on the last line of stdout."""
    try:
        outcome = run_one(args.child, folder(args.sf), args.epochs, args.fraction, args.seed,
                          args.slow)
    except Exception as error:  # noqa: BLE001 - reported by the parent
        kind = "IvmError" if isinstance(error, ivm.IvmError) else "internal"
        outcome = Outcome(args.child, "error", f"{kind} {type(error).__name__}: "
                          f"{first_line(error)}")
    print(json.dumps(asdict(outcome)))


# --- the parent: every query, one process each ------------------------------------------


def resident_gb(pid: int) -> float:
    """The resident memory of process ``pid`` in GB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def run_child(name: str, args: argparse.Namespace) -> Outcome:
    """Run one query in a child process, watching its time and memory."""
    command = [sys.executable, __file__, "--child", name, "--sf", repr(args.sf),
               "--epochs", str(args.epochs), "--fraction", repr(args.fraction),
               "--seed", str(args.seed), "--slow", repr(args.slow)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    began, peak, killed = time.perf_counter(), 0.0, ""
    while process.poll() is None:
        peak = max(peak, resident_gb(process.pid))
        elapsed = time.perf_counter() - began
        if elapsed > args.timeout or peak > args.memory:
            killed = (f"killed after {elapsed:.0f} s" if elapsed > args.timeout
                      else f"killed at {peak:.1f} GB resident")
            os.killpg(process.pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    stdout, stderr = process.communicate()
    if killed:
        return Outcome(name, "slow", killed, peak_gb=peak)
    lines = stdout.strip().splitlines()
    try:
        outcome = Outcome(**json.loads(lines[-1]))
    except (IndexError, ValueError, TypeError):
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        outcome = Outcome(name, "error", f"process failed ({process.returncode}): {tail[0]}")
    outcome.peak_gb = peak
    return outcome


STYLE = {"exact": "green", "refused": "yellow", "wrong": "bold red", "error": "bold red",
         "slow": "bold magenta"}


def seconds(value: float | None) -> str:
    """A duration for the table."""
    return "" if value is None else f"{value:.2f}"


def report(console: Console, outcomes: list[Outcome], title: str) -> None:
    """The per-query table and the tally."""
    table = Table(title=title)
    for column in ("query", "ingest (s)", "load (s)", "epochs (s)", "rows", "peak GB"):
        table.add_column(column, justify="right")
    table.add_column("status")
    table.add_column("note")
    for o in outcomes:
        style = STYLE.get(o.status, "default")
        table.add_row(
            o.name, seconds(o.ingest), seconds(o.load), " ".join(f"{e:.2f}" for e in o.epochs),
            "" if o.rows is None else str(o.rows),
            "" if o.peak_gb is None else f"{o.peak_gb:.2f}",
            f"[{style}]{o.status}[/]", escape(o.note if len(o.note) < 90 else o.note[:89] + "…"),
        )
    console.print(table)
    tally = {s: [o.name for o in outcomes if o.status == s] for s in STYLE}
    console.print("tally: " + ", ".join(f"{s} {len(names)}" for s, names in tally.items()))
    for status in ("wrong", "error", "slow"):
        for o in outcomes:
            if o.status == status:
                console.print(f"[{STYLE[status]}]{o.name} {status}: {escape(o.note)}[/]")


def main() -> None:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.01, help="TPC-DS scale factor")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--fraction", type=float, default=0.02,
                        help="share of a fact table's rows deleted per epoch")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", help="comma-separated query names, e.g. q09,q88")
    parser.add_argument("--slow", type=float, default=10.0,
                        help="a load or epoch slower than this is 'slow' (seconds)")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="kill a query's process after this many seconds")
    parser.add_argument("--memory", type=float, default=6.0,
                        help="kill a query's process past this resident memory (GB)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    console = Console(width=None if sys.stdout.isatty() else 160)
    data = folder(args.sf)
    names = sorted(p.stem for p in (data / "queries").glob("q*.sql"))
    if args.only:
        names = [n.strip().lower() for n in args.only.split(",")]
    began = time.perf_counter()
    outcomes = []
    for name in names:
        outcome = run_child(name, args)
        style = STYLE.get(outcome.status, "default")
        console.print(f"{name}: [{style}]{outcome.status}[/] load {seconds(outcome.load)} s, "
                      f"epochs {' '.join(f'{e:.2f}' for e in outcome.epochs)} "
                      f"{escape(outcome.note[:150])}")
        outcomes.append(outcome)
    report(console, outcomes, f"TPC-DS SF{args.sf:g} as views, {args.epochs} epochs each "
                              f"({args.fraction:.0%} of each fact table deleted and re-inserted)")
    console.print(f"total run time {time.perf_counter() - began:.0f} s")
    (DATA_ROOT / "last_run.json").write_text(json.dumps([asdict(o) for o in outcomes], indent=1))


if __name__ == "__main__":
    main()
