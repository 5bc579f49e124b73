"""Benchmark: incremental GROUP BY and join + GROUP BY views against full recomputation.

Two views over ``orders`` (1M rows by default) and ``customers`` (50k rows):

* ``by_customer``: SUM and COUNT per customer (50k groups);
* ``by_region``: orders ⋈ customers, SUM and COUNT per region.

Each epoch changes N orders (1k / 10k / 100k): half new orders, 30 % updates
of existing orders (delete + insert), 20 % deletes. The incremental time is the
whole ``db.ingest`` call: validation, both views' changes, state appends and
the commit. The baseline is what users do today: DuckDB recomputing both views
from scratch (``CREATE OR REPLACE TABLE … AS <view SQL>``) over plain tables
holding the same data, in the same process. Printed: per-epoch times, the ratio
recompute / incremental, and changed rows per second.

    .venv/bin/python benchmarks/bench_aggregate.py [--rows 1000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import duckdb
import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

import ivm

VIEWS = {
    "by_customer": (
        "SELECT customer_id, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY customer_id"
    ),
    "by_region": (
        "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
        "FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.region"
    ),
}
DDL = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, name VARCHAR, region VARCHAR);
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id BIGINT, amount DECIMAL(12,2),
                     status VARCHAR);
"""
REGIONS = np.array(["EMEA", "AMER", "APAC", "LATAM", "ANZ"])
STATUSES = np.array(["open", "shipped", "returned"])


class Workload:
    """Generates orders and CDC batches against the orders currently live."""

    def __init__(self, rows: int, customers: int, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        self.customers = customers
        self.next_id = rows
        self.live = self.orders(np.arange(rows))

    def customer_table(self) -> pa.Table:
        ids = np.arange(self.customers)
        return pa.table(
            {
                "id": ids,
                "name": pa.array([f"c{i}" for i in ids]),
                "region": REGIONS[ids % len(REGIONS)],
            }
        )

    def orders(self, ids: np.ndarray) -> pa.Table:
        n = len(ids)
        cents = self.rng.integers(100, 100_000, n)
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "customer_id": pa.array(self.rng.integers(0, self.customers, n), pa.int64()),
                "amount": pa.array(cents / 100).cast(pa.decimal128(12, 2)),
                "status": STATUSES[self.rng.integers(0, len(STATUSES), n)],
            }
        )

    def batch(self, size: int) -> pa.Table:
        """A consolidated Z-set changing ``size`` orders; updates the live set."""
        inserts = size // 2
        updates = size * 3 // 10
        deletes = size - inserts - updates
        picked = self.rng.choice(self.live.num_rows, updates + deletes, replace=False)
        old = self.live.take(pa.array(picked))
        new = self.orders(np.arange(self.next_id, self.next_id + inserts))
        self.next_id += inserts
        changed = self.orders(old["id"].to_numpy()[:updates])
        keep = np.ones(self.live.num_rows, dtype=bool)
        keep[picked] = False
        self.live = pa.concat_tables([self.live.filter(pa.array(keep)), new, changed])
        minus = old.append_column("__w", pa.array(np.full(old.num_rows, -1), pa.int64()))
        plus = pa.concat_tables([new, changed])
        plus = plus.append_column("__w", pa.array(np.ones(plus.num_rows, dtype=np.int64)))
        return pa.concat_tables([minus, plus])


def recompute_seconds(con: duckdb.DuckDBPyConnection) -> float:
    """Time DuckDB rebuilding both views from scratch over plain tables."""
    start = time.perf_counter()
    for name, sql in VIEWS.items():
        con.execute(f"CREATE OR REPLACE TABLE recomputed_{name} AS {sql}")
    return time.perf_counter() - start


def apply_to_plain(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> None:
    """Keep the baseline's plain tables equal to ivm's (not timed)."""
    con.register("batch", batch)
    con.execute("DELETE FROM orders WHERE id IN (SELECT id FROM batch WHERE __w < 0)")
    con.execute("INSERT INTO orders SELECT * EXCLUDE (__w) FROM batch WHERE __w > 0")
    con.unregister("batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    console = Console()

    work = Workload(args.rows, args.customers)
    db = ivm.connect()
    db.execute(DDL)
    start = time.perf_counter()
    db.ingest({"customers": work.customer_table(), "orders": work.live})
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    console.print(
        f"loaded {args.rows:,} orders and created the views in {time.perf_counter() - start:.1f} s"
    )

    plain = duckdb.connect()
    plain.execute(DDL)
    plain.register("o", work.live)
    plain.register("c", work.customer_table())
    plain.execute("INSERT INTO orders SELECT * FROM o; INSERT INTO customers SELECT * FROM c")

    table = Table(title=f"ivm vs recompute, {args.rows:,} orders, 2 views")
    for column in ("changed rows", "ivm epoch (ms)", "recompute (ms)", "speed-up", "CDC rows/s"):
        table.add_column(column, justify="right")
    for size in (int(s) for s in args.sizes.split(",")):
        incremental, recompute = [], []
        for _ in range(args.repeats):
            batch = work.batch(size)
            start = time.perf_counter()
            db.ingest("orders", batch)
            incremental.append(time.perf_counter() - start)
            apply_to_plain(plain, batch)
            recompute.append(recompute_seconds(plain))
        inc, rec = statistics.median(incremental), statistics.median(recompute)
        table.add_row(
            f"{size:,}",
            f"{inc * 1000:.1f}",
            f"{rec * 1000:.1f}",
            f"{rec / inc:.1f}x",
            f"{size / inc:,.0f}",
        )
    console.print(table)
    for name in VIEWS:
        ours = sorted(db.read(name).to_pylist(), key=str)
        theirs = sorted(plain.sql(VIEWS[name]).to_arrow_table().to_pylist(), key=str)
        assert ours == theirs, f"{name} differs from recomputation"
    console.print("both views equal recomputation after the run")


if __name__ == "__main__":
    main()
