"""Benchmark: the fixed cost of an epoch, one changed row against a table with 10 views.

A table of 100k orders with ten simple views on it (filters, projections, GROUP BY
COUNT/SUM, a join with a small dimension table, a DISTINCT). Each epoch updates one
order (a delete and an insert of the same key). What is left is the per-epoch
overhead: batch normalization, checks, one or two statements per view, state
appends, the commit. Printed: the median epoch and its phases, from
``db.explain(view, analyze=True)``'s profile.

    .venv/bin/python benchmarks/bench_fixed_cost.py [--rows 100000] [--epochs 50]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

import ivm

DDL = """
CREATE TABLE regions (id BIGINT PRIMARY KEY, name VARCHAR);
CREATE TABLE orders (id BIGINT PRIMARY KEY, region BIGINT, amount BIGINT, status VARCHAR);
"""
VIEWS = {
    "big": "SELECT id, amount FROM orders WHERE amount > 900",
    "open_orders": "SELECT id, region FROM orders WHERE status = 'open'",
    "doubled": "SELECT id, amount * 2 AS twice FROM orders",
    "small": "SELECT id FROM orders WHERE amount < 10 AND status <> 'returned'",
    "by_region": "SELECT region, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY region",
    "by_status": "SELECT status, COUNT(*) AS n FROM orders GROUP BY status",
    "total": "SELECT SUM(amount) AS total, COUNT(*) AS n FROM orders",
    "named": "SELECT o.id, r.name FROM orders o JOIN regions r ON o.region = r.id",
    "by_name": (
        "SELECT r.name, SUM(o.amount) AS total FROM orders o JOIN regions r "
        "ON o.region = r.id GROUP BY r.name"
    ),
    "statuses": "SELECT DISTINCT status FROM orders",
}
STATUSES = np.array(["open", "shipped", "returned"])


def orders(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array(rng.integers(0, 20, n), pa.int64()),
            "amount": pa.array(rng.integers(0, 1000, n), pa.int64()),
            "status": STATUSES[rng.integers(0, 3, n)],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--epochs", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    live = orders(np.arange(args.rows), rng)
    db = ivm.connect()
    db.execute(DDL)
    regions = pa.table({"id": np.arange(20), "name": [f"r{i % 7}" for i in range(20)]})
    db.ingest({"regions": regions, "orders": live})
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    times, phases = [], []
    for _ in range(args.epochs + 5):
        picked = live.slice(int(rng.integers(0, args.rows)), 1)
        new = orders(picked["id"].to_numpy(), rng)
        batch = pa.concat_tables(
            [
                picked.append_column("__w", pa.array([-1], pa.int64())),
                new.append_column("__w", pa.array([1], pa.int64())),
            ]
        )
        start = time.perf_counter()
        db.ingest("orders", batch)
        times.append(time.perf_counter() - start)
        phases.append(dict(db.last_profile.phases))
        ids = live["id"].to_numpy()
        live = pa.concat_tables([live.filter(pa.array(ids != picked["id"][0].as_py())), new])
    times, phases = times[5:], phases[5:]  # warm-up epochs dropped
    console = Console()
    table = Table(title=f"one-row epochs, {args.rows:,} orders, {len(VIEWS)} views")
    table.add_column("", justify="left")
    table.add_column("median ms", justify="right")
    table.add_row("whole ingest", f"{statistics.median(times) * 1000:.2f}")
    for phase in phases[0]:
        table.add_row(f"  {phase}", f"{statistics.median(p[phase] for p in phases) * 1000:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
