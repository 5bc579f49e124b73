"""Benchmark: the floor of an epoch, what one DuckDB statement costs over a tiny change.

An ivm epoch is a sequence of DuckDB statements issued from Python, each over the
epoch's change and the traces it must read. However few rows a statement touches,
DuckDB parses, binds, optimizes and plans it and sets up a pipeline per join or
aggregate. This prints the median wall time of the statement shapes an epoch is
made of, over a 2-row Arrow batch and small tables, and the parts of one aggregate
step as DuckDB's own profiler reports them (binding, optimizer, physical planning,
operators). Multiply by the statements of an epoch (``db.explain(view,
analyze=True)`` counts them) for the least an epoch can cost on this stack. Last, the
least a durable epoch's transaction costs on a database file (``durable_epochs``).

    .venv/bin/python benchmarks/bench_statement_floor.py [--repeats 60]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
from durable_epochs import DurableEpochs
from rich.console import Console
from rich.table import Table

BATCH = "SELECT region, SUM(__w) AS w FROM batch GROUP BY region"
SHAPES = {
    "SELECT 1": "SELECT 1",
    "CREATE TEMP TABLE … AS SELECT 1": "CREATE OR REPLACE TEMP TABLE scratch AS SELECT 1 AS a",
    "INSERT INTO trace SELECT * FROM batch (2 rows)": "INSERT INTO trace SELECT * FROM batch",
    "GROUP BY over the 2-row batch": BATCH,
    "the same, materialized (CREATE TEMP TABLE … AS)": (
        f"CREATE OR REPLACE TEMP TABLE scratch AS {BATCH}"
    ),
    "GROUP BY, then semi join + GROUP BY of a 44-row trace, then LEFT JOIN (CTEs)": (
        f"WITH p AS ({BATCH}), o AS (SELECT k, SUM(c) AS c FROM state SEMI JOIN p "
        "ON state.k = p.region GROUP BY k) SELECT * FROM p LEFT JOIN o ON p.region = o.k"
    ),
    "UPDATE one row (the epoch counter)": "UPDATE meta SET epoch = epoch + 1",
}
STEP = (
    f"WITH p AS ({BATCH}), o AS (SELECT k, SUM(c) AS c, SUM(w) AS w FROM state SEMI JOIN p "
    "ON state.k IS NOT DISTINCT FROM p.region GROUP BY ALL HAVING SUM(w) > 0), "
    "n AS (SELECT p.region AS k, COALESCE(o.c, 0) + p.w AS c FROM p LEFT JOIN o "
    "ON p.region IS NOT DISTINCT FROM o.k) "
    "SELECT k, c, -1 AS w FROM o UNION ALL SELECT k, c, 1 AS w FROM n WHERE c > 0"
)
"""An invertible aggregate's step, as ivm writes it (simplified): the change grouped, the
touched groups' old versions, their new versions, both emitted."""


def connection() -> duckdb.DuckDBPyConnection:
    """An in-memory database with a 2-row batch, a small trace and a group-state table."""
    con = duckdb.connect()
    batch = pa.table({"id": [1, 2], "region": [1, 2], "amount": [5, 6], "__w": [1, -1]})
    con.register("batch", batch)
    con.execute("CREATE TABLE trace AS SELECT * FROM batch WHERE false")
    con.execute(
        "CREATE TABLE state AS SELECT range % 20 AS k, range AS c, 1 AS w FROM range(44)"
    )
    con.execute("CREATE TABLE meta AS SELECT 0 AS epoch")
    return con


def median_ms(run: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``run`` in milliseconds, after two warm-up runs."""
    for _ in range(2):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def profiled(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, float]:
    """DuckDB's own account of one run of ``sql``, in milliseconds."""
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "profile.json"
        con.execute("PRAGMA enable_profiling = 'json'")
        con.execute("SET profiling_mode = 'detailed'")
        con.execute(f"SET profiling_output = '{output}'")
        con.execute(sql).fetchall()
        con.execute("PRAGMA disable_profiling")
        report = json.loads(output.read_text())
    return {
        "binding": report["planner"]["binding_time"] * 1000,
        "optimizer": report["optimizer"]["total_time"] * 1000,
        "physical planning": report["physical_planner"]["total_time"] * 1000,
        "operators (CPU)": report["query"]["cpu_time"] * 1000,
        "DuckDB's total": report["query"]["total_time"] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()
    con = connection()
    console = Console()
    table = Table(title="one statement over a 2-row change (median wall time, ms)")
    table.add_column("statement")
    for threads in (2, 1):
        table.add_column(f"threads={threads}", justify="right")
    rows: dict[str, list[float]] = {name: [] for name in [*SHAPES, "an aggregate's step"]}
    for threads in (2, 1):
        con.execute(f"SET threads = {threads}")
        for name, sql in SHAPES.items():
            rows[name].append(median_ms(lambda s=sql: con.execute(s).fetchall(), args.repeats))
        step = median_ms(lambda: con.execute(STEP).fetchall(), args.repeats)
        rows["an aggregate's step"].append(step)
    for name, times in rows.items():
        table.add_row(name, *(f"{t:.2f}" for t in times))
    console.print(table)
    con.execute("SET threads = 2")
    parts = Table(title="the aggregate's step, as DuckDB's profiler splits it (ms)")
    parts.add_column("part")
    parts.add_column("ms", justify="right")
    for part, ms in profiled(con, STEP).items():
        parts.add_row(part, f"{ms:.2f}")
    console.print(parts)
    epochs = Table(title="a durable epoch, no view work (median wall time, ms)")
    epochs.add_column("transaction")
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for where in (Path(folder), None):
            epochs.add_column("database file" if where else "in memory", justify="right")
            durable = DurableEpochs(where)
            for name, run in durable.shapes().items():
                times.setdefault(name, []).append(median_ms(run, args.repeats))
            durable.close()
    for name, ms in times.items():
        epochs.add_row(name, *(f"{t:.2f}" for t in ms))
    console.print(epochs)


if __name__ == "__main__":
    main()
