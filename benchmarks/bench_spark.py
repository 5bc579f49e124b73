"""Benchmark: Spark mode against Spark SQL recomputing the same views, on one Spark.

Three tables: ``orders`` (5M rows by default), ``customers`` (100k) and ``regions``
(50 regions in 5 zones); five views, the ``bench_aggregate`` views and a 3-way join::

    by_customer      SELECT customer, SUM(amount), COUNT(*) FROM orders GROUP BY customer
    customer_top     ... COUNT(*), SUM(amount), MAX(amount) ... GROUP BY customer
    by_region        orders JOIN customers, GROUP BY region
    by_zone          orders JOIN customers JOIN regions, GROUP BY zone
    large_orders     SELECT id, customer, amount FROM orders WHERE amount > 990

The tables are loaded as Spark DataFrames (``db.ingest`` of a DataFrame, so the rows
never pass through the driver), then the views are created (backfills). Each epoch
then changes 10k orders (half deletes of existing orders, half new orders), sent as an
Arrow batch with weights. Printed:

* Spark mode's ``db.ingest`` latency (median over the epochs);
* Spark SQL recomputing the five views from scratch over the same data, as Parquet
  files (what a scheduled Spark job reads) and as cached DataFrames (its best case),
  on the same session;
* the fixed cost of an epoch: ``db.ingest`` of a batch changing one order (median);
* where an epoch's time goes: the driver building the plan, the one Spark job, the
  tasks' own seconds per table and view (``stats``).

The ratio recompute / incremental is the number to read; absolute times depend on the
machine. Every view is checked against ``db.sql`` recomputing it.

    .venv/bin/python benchmarks/bench_spark.py [--rows 5000000] [--partitions 2] [--cluster]

``--cluster`` runs it all on a Spark standalone cluster started on this machine (a
master and two one-core workers, each its own JVM: ``ivm.views.spark.local_cluster``)
instead of ``local[2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from rich.console import Console
from rich.table import Table

import ivm
from ivm.views.spark.local_cluster import LocalCluster

VIEWS = {
    "by_customer": "SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders "
                   "GROUP BY customer",
    "customer_top": "SELECT customer, COUNT(*) AS n, SUM(amount) AS total, "
                    "MAX(amount) AS top FROM orders GROUP BY customer",
    "by_region": "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total, MAX(o.amount) AS top "
                 "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region",
    "by_zone": "SELECT r.zone, COUNT(*) AS n, SUM(o.amount) AS total FROM orders o "
               "JOIN customers c ON o.customer = c.id JOIN regions r ON c.region = r.name "
               "GROUP BY r.zone",
    "large_orders": "SELECT id, customer, amount FROM orders WHERE amount > 990",
}
DDL = """
CREATE TABLE regions (name VARCHAR PRIMARY KEY, zone VARCHAR);
CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR);
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, amount DECIMAL(12,2));
"""
REGIONS = 50
ZONES = 5


def amount_of(order_id: int) -> Decimal:
    """Every order's amount is a function of its id, so the driver can delete it exactly."""
    return Decimal((order_id * 7919) % 100_000) / 100


def spark_session(master: str, executor_memory: str) -> object:
    """A Spark session for the benchmark: Python workers reached over Unix domain sockets
    (each Python stage ≈40 ms faster than over TCP on this machine, see docs/spark.md)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("ivm-bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.executor.memory", executor_memory)  # on a cluster only
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.python.unix.domain.socket.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def generated_tables(spark: object, rows: int, customers: int) -> dict[str, object]:
    """``orders``, ``customers`` and ``regions`` as Spark DataFrames (made on the executors)."""
    from pyspark.sql import functions as F

    orders = spark.range(rows).select(  # type: ignore[attr-defined]
        F.col("id"),
        (F.col("id") % customers).alias("customer"),
        ((F.col("id") * 7919 % 100_000) / 100).cast("decimal(12,2)").alias("amount"),
    )
    customer_rows = spark.range(customers).select(  # type: ignore[attr-defined]
        F.col("id"), F.concat(F.lit("region-"), (F.col("id") % REGIONS).cast("string"))
        .alias("region"),
    )
    regions = spark.range(REGIONS).select(  # type: ignore[attr-defined]
        F.concat(F.lit("region-"), F.col("id").cast("string")).alias("name"),
        F.concat(F.lit("zone-"), (F.col("id") % ZONES).cast("string")).alias("zone"),
    )
    return {"orders": orders, "customers": customer_rows, "regions": regions}


def orders_batch(deleted: range, inserted: range, customers: int) -> pa.Table:
    """A weighted batch deleting the orders ``deleted`` (they exist) and adding ``inserted``."""
    ids = [*deleted, *inserted]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "customer": pa.array([i % customers for i in ids], pa.int64()),
        "amount": pa.array([amount_of(i) for i in ids], pa.decimal128(12, 2)),
        "__w": pa.array([-1] * len(deleted) + [1] * len(inserted), pa.int64()),
    })


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def recompute(spark: object, prefix: str) -> None:
    """Spark SQL computing every view from scratch over tables ``<prefix>_<table>``."""
    for sql in VIEWS.values():
        for table in ("orders", "customers", "regions"):
            sql = sql.replace(f"FROM {table}", f"FROM {prefix}_{table}")
            sql = sql.replace(f"JOIN {table}", f"JOIN {prefix}_{table}")
        spark.sql(sql).collect()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--customers", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cluster", action="store_true",
                        help="run on a standalone cluster started here: a master and two "
                             "one-core workers, each its own JVM (instead of --master)")
    parser.add_argument("--executor-memory", default="4g", help="each worker's (--cluster)")
    args = parser.parse_args()
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="ivm-bench-spark-"))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        master = args.master
        if args.cluster:
            master = cleanup.enter_context(LocalCluster(
                work / "cluster", workers=2, cores=1, memory=args.executor_memory)).master_url
        spark = spark_session(master, args.executor_memory)
        cleanup.callback(spark.stop)  # type: ignore[attr-defined]
        run(spark, args, master, work, console)


def run(
    spark: object, args: argparse.Namespace, master: str, work: Path, console: Console
) -> None:
    """Load, create the views, time the epochs and Spark SQL's recomputations, print."""
    tables = generated_tables(spark, args.rows, args.customers)
    db = ivm.connect(work / "state", spark=spark, partitions=args.partitions)
    db.execute(DDL)
    load = timed(lambda: db.ingest(tables))
    creates = {
        name: timed(lambda n=name, q=sql: db.execute(f"CREATE VIEW {n} AS {q}"))
        for name, sql in VIEWS.items()
    }
    console.print(
        f"loaded {args.rows:,} orders + {args.customers:,} customers in {load:.1f}s; "
        f"views created (backfills) in {', '.join(f'{s:.1f}' for s in creates.values())}s;"
        f" {args.partitions} partitions, {master}"
    )

    parquet = work / "parquet"
    for name, frame in tables.items():
        frame.write.parquet(str(parquet / name))  # type: ignore[attr-defined]
        spark.read.parquet(str(parquet / name)).createOrReplaceTempView(f"p_{name}")
        cached = frame.cache()  # type: ignore[attr-defined]
        cached.count()
        cached.createOrReplaceTempView(f"m_{name}")

    incremental, from_parquet, from_memory, splits = [], [], [], []
    for epoch in range(args.epochs + 1):  # the first epoch warms up
        half = args.batch // 2
        first_new = args.rows + epoch * half
        batch = orders_batch(range(epoch * half, (epoch + 1) * half),
                             range(first_new, first_new + half), args.customers)
        seconds = timed(lambda b=batch: db.ingest("orders", b))
        phases = db.stats()
        parquet_s = timed(lambda: recompute(spark, "p"))
        memory_s = timed(lambda: recompute(spark, "m"))
        if epoch:
            incremental.append(seconds)
            from_parquet.append(parquet_s)
            from_memory.append(memory_s)
            splits.append({n: phases[n].last_seconds for n in VIEWS})
    overheads = []
    for i in range(7):
        new = 10 * args.rows + i
        overheads.append(timed(lambda n=new: db.ingest(
            "orders", orders_batch(range(0), range(n, n + 1), args.customers))))
    overhead = statistics.median(overheads[2:])

    for name, sql in VIEWS.items():
        expected = sorted(db.sql(sql).to_pylist(), key=repr)
        actual = sorted(db.read(name).to_pylist(), key=repr)
        assert expected == actual, f"{name} differs from its recomputation"

    inc = statistics.median(incremental)
    parquet_s = statistics.median(from_parquet)
    memory_s = statistics.median(from_memory)
    table = Table(title=f"Spark mode, five views over {args.rows:,} orders")
    for column in ("batch", "ivm ingest", "Spark SQL (parquet)", "ratio",
                   "Spark SQL (cached)", "ratio", "fixed cost (1 row)"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{args.batch:,}", f"{inc:.2f}s",
        f"{parquet_s:.2f}s", f"{parquet_s / inc:.1f}x",
        f"{memory_s:.2f}s", f"{memory_s / inc:.1f}x",
        f"{overhead:.2f}s",
    )
    console.print(table)
    console.print(f"per-epoch ivm times: {', '.join(f'{s:.2f}' for s in incremental)}")
    console.print("stage tasks' seconds per view (median over the epochs; both cores): "
                  + ", ".join(f"{n} {statistics.median(s[n] or 0 for s in splits):.2f}"
                              for n in VIEWS))
    console.print(db.explain("by_zone", analyze=True).splitlines()[0])
    db.close()


if __name__ == "__main__":
    main()
