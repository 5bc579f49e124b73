"""Benchmark: Spark mode against Spark SQL recomputing the same view, on one local Spark.

The view joins ``orders`` (5M rows by default) with ``customers`` (100k rows)
and aggregates per region::

    SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total, MAX(o.amount) AS top
    FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region

The tables are loaded as Spark DataFrames (``db.ingest`` of a DataFrame, so the
rows never pass through the driver), then the view is created (a backfill).
Each epoch then changes 10k orders (half deletes of existing orders, half new
orders), sent as an Arrow batch with weights. Printed per epoch size:

* Spark mode's ``db.ingest`` latency (median over the epochs);
* Spark SQL recomputing the view from scratch over the same data, as Parquet
  files (what a scheduled Spark job reads) and as cached DataFrames (its best
  case), on the same session;
* the fixed per-epoch overhead: ``db.ingest`` of a batch changing one order.

The ratio recompute / incremental is the number to read; absolute times depend
on the machine. The result is checked against ``db.sql`` recomputing the view.

    .venv/bin/python benchmarks/bench_spark.py [--rows 5000000] [--partitions 2]
"""

from __future__ import annotations

import argparse
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

VIEW = (
    "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total, MAX(o.amount) AS top "
    "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region"
)
DDL = f"""
CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR);
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, amount DECIMAL(12,2));
CREATE VIEW revenue AS {VIEW};
"""
REGIONS = 50


def amount_of(order_id: int) -> Decimal:
    """Every order's amount is a function of its id, so the driver can delete it exactly."""
    return Decimal((order_id * 7919) % 100_000) / 100


def spark_session(master: str) -> object:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("ivm-bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def generated_tables(spark: object, rows: int, customers: int) -> tuple[object, object]:
    """``orders`` and ``customers`` as Spark DataFrames (generated on the executors)."""
    from pyspark.sql import functions as F

    orders = spark.range(rows).select(  # type: ignore[attr-defined]
        F.col("id"),
        (F.col("id") % customers).alias("customer"),
        ((F.col("id") * 7919 % 100_000) / 100).cast("decimal(12,2)").alias("amount"),
    )
    regions = spark.range(customers).select(  # type: ignore[attr-defined]
        F.col("id"), F.concat(F.lit("region-"), (F.col("id") % REGIONS).cast("string"))
        .alias("region"),
    )
    return orders, regions


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--customers", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    console = Console()
    spark = spark_session(args.master)
    work = Path(tempfile.mkdtemp(prefix="ivm-bench-spark-"))
    try:
        orders, customers = generated_tables(spark, args.rows, args.customers)
        db = ivm.connect(work / "state", spark=spark, partitions=args.partitions)
        db.execute(DDL.replace(f"CREATE VIEW revenue AS {VIEW};", ""))
        load = timed(lambda: db.ingest({"orders": orders, "customers": customers}))
        backfill = timed(lambda: db.execute(f"CREATE VIEW revenue AS {VIEW}"))
        console.print(
            f"loaded {args.rows:,} orders + {args.customers:,} customers in {load:.1f}s; "
            f"view created (backfill) in {backfill:.1f}s; {args.partitions} partitions, "
            f"{args.master}"
        )

        parquet = work / "parquet"
        orders.write.parquet(str(parquet / "orders"))
        customers.write.parquet(str(parquet / "customers"))
        spark.read.parquet(str(parquet / "orders")).createOrReplaceTempView("p_orders")
        spark.read.parquet(str(parquet / "customers")).createOrReplaceTempView("p_customers")
        cached_orders = orders.cache()
        cached_customers = customers.cache()
        cached_orders.count()
        cached_customers.count()
        cached_orders.createOrReplaceTempView("m_orders")
        cached_customers.createOrReplaceTempView("m_customers")

        def recompute(prefix: str) -> None:
            sql = VIEW.replace("FROM orders", f"FROM {prefix}_orders").replace(
                "JOIN customers", f"JOIN {prefix}_customers"
            )
            spark.sql(sql).collect()

        incremental, from_parquet, from_memory = [], [], []
        for epoch in range(args.epochs + 1):  # the first epoch warms up
            half = args.batch // 2
            first_new = args.rows + epoch * half
            batch = orders_batch(range(epoch * half, (epoch + 1) * half),
                                 range(first_new, first_new + half), args.customers)
            seconds = timed(lambda b=batch: db.ingest("orders", b))
            parquet_s = timed(lambda: recompute("p"))
            memory_s = timed(lambda: recompute("m"))
            if epoch:
                incremental.append(seconds)
                from_parquet.append(parquet_s)
                from_memory.append(memory_s)
        overhead = statistics.median(
            timed(lambda i=i: db.ingest("orders", orders_batch(
                range(0), range(10 * args.rows + i, 10 * args.rows + i + 1), args.customers)))
            for i in range(3)
        )

        expected = db.sql(VIEW + " ORDER BY region").to_pylist()
        actual = db.sql("SELECT * FROM revenue ORDER BY region").to_pylist()
        assert expected == actual, "the view differs from its recomputation"

        inc = statistics.median(incremental)
        table = Table(title=f"Spark mode, join + aggregate over {args.rows:,} orders")
        for column in ("batch", "ivm ingest", "Spark SQL (parquet)", "ratio",
                       "Spark SQL (cached)", "ratio", "fixed overhead"):
            table.add_column(column, justify="right")
        table.add_row(
            f"{args.batch:,}",
            f"{inc:.2f}s",
            f"{statistics.median(from_parquet):.2f}s",
            f"{statistics.median(from_parquet) / inc:.1f}x",
            f"{statistics.median(from_memory):.2f}s",
            f"{statistics.median(from_memory) / inc:.1f}x",
            f"{overhead:.2f}s",
        )
        console.print(table)
        console.print(f"per-epoch ivm times: {', '.join(f'{s:.2f}' for s in incremental)}")
        db.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
