"""Benchmark: incremental GROUP BY and join + GROUP BY views against full recomputation.

Two views over ``orders`` (1M rows by default) and ``customers`` (50k rows), in one
of two workloads (``--amounts``, or ``--workloads decimal,double`` for both, one
after the other, one table each):

* ``decimal`` (the default): ``amount`` is DECIMAL(12,2);

  * ``by_customer``: SUM and COUNT per customer (50k groups);
  * ``by_region``: orders ⋈ customers, SUM and COUNT per region;

  each epoch changes N orders (1k / 10k / 100k): half new orders, 30 % updates
  of existing orders (delete + insert), 20 % deletes.
* ``double``: ``amount`` is DOUBLE;

  * ``by_customer``: COUNT(*), SUM and MAX per customer (SUM and MAX over DOUBLE
    are not invertible: ivm recomputes each touched customer from its rows);
  * ``by_region``: orders ⋈ customers, SUM and COUNT per region;

  each epoch changes N orders: half deletes of existing orders, half new orders.

The incremental time is the whole ``db.ingest`` call: validation, both views'
changes, state appends and the commit. The baseline is what users do today:
DuckDB recomputing both views from scratch (``CREATE OR REPLACE TABLE … AS <view
SQL>``) over plain tables holding the same data, in the same process. Printed:
per-epoch times, the ratio recompute / incremental, the same with DuckDB's own
application of the batch to its plain tables added to the recompute (DELETE +
INSERT: what a user who recomputes also runs, and what ivm's epoch includes), and
changed rows per second; and the floor: epochs of the first size timed before the
views exist (checking, appending and committing the batch alone), the least any epoch
of that size costs whatever its views.
At the end each view must equal recomputation (exactly for DECIMAL; DOUBLE
values within a relative tolerance of 1e-9).

    .venv/bin/python benchmarks/bench_aggregate.py [--rows 1000000] [--repeats 5]
        [--amounts decimal|double] [--workloads decimal,double]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

import ivm

BY_REGION = (
    "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
    "FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.region"
)
DDL = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, name VARCHAR, region VARCHAR);
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id BIGINT, amount {amount},
                     status VARCHAR);
"""
REGIONS = np.array(["EMEA", "AMER", "APAC", "LATAM", "ANZ"])
STATUSES = np.array(["open", "shipped", "returned"])
FLOAT_TOLERANCE = 1e-9
LOAD_PART = 10_000_000
"""Orders per loading epoch."""


@dataclass(frozen=True)
class Spec:
    """One workload: the amount type, the views, and each epoch's change mix."""

    amount_type: str
    views: dict[str, str]
    updates_percent: int
    """Share of an epoch's changes that update an existing order (delete + insert);
    half of them are new orders, the rest deletes of existing orders."""
    mix: str


WORKLOADS = {
    "decimal": Spec(
        amount_type="DECIMAL(12,2)",
        views={
            "by_customer": (
                "SELECT customer_id, SUM(amount) AS total, COUNT(*) AS n "
                "FROM orders GROUP BY customer_id"
            ),
            "by_region": BY_REGION,
        },
        updates_percent=30,
        mix="50 % new orders, 30 % updates, 20 % deletes",
    ),
    "double": Spec(
        amount_type="DOUBLE",
        views={
            "by_customer": (
                "SELECT customer_id, COUNT(*) AS n, SUM(amount) AS total, "
                "MAX(amount) AS top FROM orders GROUP BY customer_id"
            ),
            "by_region": BY_REGION,
        },
        updates_percent=0,
        mix="50 % new orders, 50 % deletes",
    ),
}


class Workload:
    """Generates orders and CDC batches against the orders currently live (vectorized).

    The live orders are numpy columns changed in place (a deleted order's slot takes the
    last order), so a batch costs its size, not the table's: 100M orders fit."""

    def __init__(self, spec: Spec, rows: int, customers: int, seed: int = 7) -> None:
        self.spec = spec
        self.rng = np.random.default_rng(seed)
        self.customers = customers
        self.next_id = rows
        self._columns = self._draw(rows)
        self._columns["id"] = np.arange(rows, dtype=np.int64)
        self._size = rows

    def customer_table(self) -> pa.Table:
        ids = pa.array(np.arange(self.customers, dtype=np.int64))
        return pa.table(
            {
                "id": ids,
                "name": pc.binary_join_element_wise("c", pc.cast(ids, pa.string()), ""),
                "region": REGIONS[np.arange(self.customers) % len(REGIONS)],
            }
        )

    @property
    def live(self) -> pa.Table:
        """Every live order."""
        return self.live_part(0, self._size)

    def live_part(self, start: int, stop: int) -> pa.Table:
        """The live orders in slots ``start`` to ``stop`` (for loading in parts)."""
        return self._table({n: c[start:stop] for n, c in self._columns.items()})

    def _draw(self, n: int) -> dict[str, np.ndarray]:
        """Random customer, amount (cents) and status of ``n`` orders."""
        return {
            "customer_id": self.rng.integers(0, self.customers, n, dtype=np.int64),
            "cents": self.rng.integers(100, 100_000, n, dtype=np.int64),
            "status": self.rng.integers(0, len(STATUSES), n, dtype=np.int8),
        }

    def _table(self, columns: dict[str, np.ndarray]) -> pa.Table:
        amount = pa.array(columns["cents"] / 100)
        if self.spec.amount_type != "DOUBLE":
            amount = amount.cast(pa.decimal128(12, 2))
        return pa.table(
            {
                "id": pa.array(columns["id"], pa.int64()),
                "customer_id": pa.array(columns["customer_id"], pa.int64()),
                "amount": amount,
                "status": STATUSES[columns["status"]],
            }
        )

    def _put(self, slots: np.ndarray, values: dict[str, np.ndarray]) -> None:
        for name, column in values.items():
            self._columns[name][slots] = column

    def _append(self, values: dict[str, np.ndarray]) -> None:
        n = len(values["id"])
        if self._size + n > len(self._columns["id"]):
            grown = max(self._size + n, len(self._columns["id"]) * 5 // 4 + 1024)
            for name, column in self._columns.items():
                wider = np.empty(grown, column.dtype)
                wider[: self._size] = column[: self._size]
                self._columns[name] = wider
        self._put(np.arange(self._size, self._size + n), values)
        self._size += n

    def batch(self, size: int) -> pa.Table:
        """A consolidated Z-set changing ``size`` orders; updates the live set."""
        inserts = size // 2
        updates = size * self.spec.updates_percent // 100
        deletes = size - inserts - updates
        picked = self.rng.choice(self._size, updates + deletes, replace=False)
        old = {n: c[picked] for n, c in self._columns.items()}
        changed = self._draw(updates) | {"id": old["id"][:updates]}
        new = self._draw(inserts) | {"id": np.arange(self.next_id, self.next_id + inserts)}
        self.next_id += inserts
        self._put(picked[:updates], changed)
        # Deleted slots take the last live orders (those not deleted themselves).
        gone = np.sort(picked[updates:])
        tail = np.arange(self._size - len(gone), self._size)
        movers = np.setdiff1d(tail, gone)
        holes = np.setdiff1d(gone, tail)
        self._put(holes, {n: c[movers] for n, c in self._columns.items()})
        self._size -= len(gone)
        self._append(new)
        minus = self._table(old).append_column("__w", pa.array(np.full(len(picked), -1)))
        plus = pa.concat_tables([self._table(new), self._table(changed)])
        plus = plus.append_column("__w", pa.array(np.ones(plus.num_rows, dtype=np.int64)))
        return pa.concat_tables([minus, plus])


def recompute_seconds(con: duckdb.DuckDBPyConnection, views: dict[str, str]) -> float:
    """Time DuckDB rebuilding both views from scratch over plain tables."""
    start = time.perf_counter()
    for name, sql in views.items():
        con.execute(f"CREATE OR REPLACE TABLE recomputed_{name} AS {sql}")
    return time.perf_counter() - start


def apply_to_plain(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> None:
    """Apply the batch to the baseline's plain tables (timed apart: a user who recomputes
    must apply the change to the base tables too, which ivm's epoch includes)."""
    con.register("batch", batch)
    con.execute("DELETE FROM orders WHERE id IN (SELECT id FROM batch WHERE __w < 0)")
    con.execute("INSERT INTO orders SELECT * EXCLUDE (__w) FROM batch WHERE __w > 0")
    con.unregister("batch")


def time_epochs(
    db: ivm.Session,
    plain: duckdb.DuckDBPyConnection,
    work: Workload,
    views: dict[str, str],
    size: int,
    repeats: int,
) -> tuple[float, float, float]:
    """Median seconds of ivm's epoch, of DuckDB recomputing ``views``, and of DuckDB
    applying the batch plus recomputing, over ``repeats`` batches of ``size`` changes."""
    incremental, recompute, applied = [], [], []
    for _ in range(repeats):
        batch = work.batch(size)
        start = time.perf_counter()
        db.ingest("orders", batch)
        incremental.append(time.perf_counter() - start)
        start = time.perf_counter()
        apply_to_plain(plain, batch)
        applied.append(time.perf_counter() - start)
        recompute.append(recompute_seconds(plain, views))
    both = statistics.median(a + r for a, r in zip(applied, recompute, strict=True))
    return statistics.median(incremental), statistics.median(recompute), both


def floor_seconds(
    db: ivm.Session, plain: duckdb.DuckDBPyConnection, work: Workload, size: int, repeats: int
) -> float:
    """Median seconds of an epoch of ``size`` changes with no view defined (applied to the
    plain tables too): the least any epoch of that size costs."""
    seconds = []
    for _ in range(repeats):
        batch = work.batch(size)
        start = time.perf_counter()
        db.ingest("orders", batch)
        seconds.append(time.perf_counter() - start)
        apply_to_plain(plain, batch)
    return statistics.median(seconds)


def difference(ours: pa.Table, theirs: pa.Table) -> str | None:
    """None when both hold the same rows (DOUBLE within FLOAT_TOLERANCE, the rest exactly)."""
    if ours.schema != theirs.schema:
        return f"schema {ours.schema} vs {theirs.schema}"
    if ours.num_rows != theirs.num_rows:
        return f"{ours.num_rows} rows vs {theirs.num_rows}"
    floats = {f.name for f in ours.schema if pa.types.is_floating(f.type)}
    keys = [(f.name, "ascending") for f in ours.schema if f.name not in floats]
    keys += [(name, "ascending") for name in floats]
    a, b = ours.sort_by(keys), theirs.sort_by(keys)
    for name in ours.column_names:
        x, y = a[name].combine_chunks(), b[name].combine_chunks()
        if name not in floats:
            if not x.equals(y):
                return f"{name} differs"
            continue
        if not x.is_null().equals(y.is_null()):
            return f"{name}: NULLs differ"
        u, v = x.to_numpy(zero_copy_only=False), y.to_numpy(zero_copy_only=False)
        off = np.abs(u - v) > FLOAT_TOLERANCE * np.maximum(np.abs(u), np.abs(v))
        if off.any():
            i = int(np.flatnonzero(off)[0])
            return f"{name}: {int(off.sum())} values off by more than 1e-9, e.g. {u[i]} vs {v[i]}"
    return None


def run(console: Console, name: str, args: argparse.Namespace) -> None:
    """Load, create the views, time the epochs and print one table for workload ``name``."""
    spec = WORKLOADS[name]
    ddl = DDL.format(amount=spec.amount_type)
    start = time.perf_counter()
    work = Workload(spec, args.rows, args.customers)
    customers = work.customer_table()
    console.print(f"{name}: generated {args.rows:,} orders in {time.perf_counter() - start:.1f} s")
    db = ivm.connect()
    db.execute(ddl)
    plain = duckdb.connect()
    plain.execute(ddl)
    plain.register("c", customers)
    plain.execute("INSERT INTO customers SELECT * FROM c")
    plain.unregister("c")
    start = time.perf_counter()
    db.ingest({"customers": customers})
    parts = range(0, args.rows, LOAD_PART)
    for first in parts:  # in parts: 100M orders as one Arrow table would double memory
        part = work.live_part(first, min(first + LOAD_PART, args.rows))
        db.ingest({"orders": part})
        plain.register("o", part)
        plain.execute("INSERT INTO orders SELECT * FROM o")
        plain.unregister("o")
    loaded = time.perf_counter() - start
    sizes = [int(s) for s in args.sizes.split(",")]
    floor = floor_seconds(db, plain, work, sizes[0], args.repeats)
    start = time.perf_counter()
    for view, sql in spec.views.items():
        db.execute(f"CREATE VIEW {view} AS {sql}")
    console.print(
        f"{name}: loaded {args.rows:,} orders in {len(parts)} epoch(s) in {loaded:.1f} s "
        f"(with DuckDB's copy); created the views in {time.perf_counter() - start:.1f} s"
    )

    table = Table(
        title=f"ivm vs recompute, {args.rows:,} orders, amounts {spec.amount_type}, "
        f"2 views; epochs: {spec.mix}"
    )
    columns = (
        "changed rows", "ivm epoch (ms)", "recompute (ms)", "speed-up",
        "apply + recompute (ms)", "speed-up", "CDC rows/s",
    )
    for column in columns:
        table.add_column(column, justify="right")
    first_recompute = 0.0
    for size in sizes:
        inc, rec, both = time_epochs(db, plain, work, spec.views, size, args.repeats)
        first_recompute = first_recompute or rec
        table.add_row(
            f"{size:,}",
            f"{inc * 1000:.1f}",
            f"{rec * 1000:.1f}",
            f"{rec / inc:.1f}x",
            f"{both * 1000:.1f}",
            f"{both / inc:.1f}x",
            f"{size / inc:,.0f}",
        )
    console.print(table)
    console.print(
        f"{name}: the floor: an epoch of {sizes[0]:,} changed orders before any view existed "
        f"took {floor * 1000:.1f} ms (checking, appending and committing the batch); no view "
        f"can make such an epoch cheaper: at most {first_recompute / floor:.1f}x recomputing"
    )
    for view, sql in spec.views.items():
        problem = difference(db.read(view), plain.sql(sql).to_arrow_table())
        assert problem is None, f"{name}: {view} differs from recomputation: {problem}"
    console.print(f"{name}: both views equal recomputation after the run")
    trace = db._con.execute('SELECT count(*) FROM "__ivm_rel_orders"').fetchall()[0][0]
    live = db.sql("SELECT count(*) AS n FROM orders").column("n")[0].as_py()
    console.print(
        f"{name}: orders trace holds {trace:,} rows for {live:,} live rows "
        f"({trace / live:.2f}x; compaction keeps it under 1.5x)"
    )
    for size in db._arrangements.sizes():  # the in-memory indexes, each once
        console.print(
            f"{name}: arrangement of {size.table} by {', '.join(size.key)} "
            f"({len(size.columns)} of {size.of_columns} columns): {size.entries:,} entries, "
            f"{size.bytes / 2**20:,.0f} MB, {size.bytes / max(size.entries, 1):.0f} bytes each"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    console.print(f"{name}: peak resident memory of this process so far {peak:.1f} GB")
    db.close()
    plain.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--amounts", choices=sorted(WORKLOADS), default="decimal")
    parser.add_argument(
        "--workloads", help="comma-separated workloads to run in turn, e.g. decimal,double"
    )
    args = parser.parse_args()
    names = args.workloads.split(",") if args.workloads else [args.amounts]
    if unknown := [n for n in names if n not in WORKLOADS]:
        parser.error(f"unknown workloads {unknown}; choose from {sorted(WORKLOADS)}")
    console = Console()
    for name in names:
        run(console, name, args)


if __name__ == "__main__":
    main()
