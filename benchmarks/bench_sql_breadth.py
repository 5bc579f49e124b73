"""Benchmark: outer join + aggregate, NOT EXISTS and top-k views against recomputation.

The tables of ``bench_aggregate`` (1M ``orders`` by default, DECIMAL amounts, 50k
``customers``), and the views of issue #9's speed target:

* ``per_customer``: customers LEFT JOIN orders, COUNT and SUM per customer (every
  customer once, those without orders with a count of 0);
* ``no_returns``: customers with no returned order (NOT EXISTS, correlated);
* with ``--views top_orders,top_customers``: the 100 largest orders (ORDER BY … LIMIT
  over the table) and the 10 customers with the largest totals (over a GROUP BY);

each epoch changes N orders (1k / 10k): half new orders, 30 % updates, 20 % deletes.
The incremental time is the whole ``db.ingest`` call; the baseline is DuckDB
recomputing both views over plain tables holding the same data, in the same process
(and, apart, with the batch's own DELETE + INSERT into those tables added). At the
end both views must equal recomputation.

    .venv/bin/python benchmarks/bench_sql_breadth.py [--rows 1000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import duckdb
from bench_aggregate import DDL, WORKLOADS, Workload, difference, time_epochs
from rich.console import Console
from rich.table import Table

import ivm

VIEWS = {
    "per_customer": (
        "SELECT c.id, c.name, COUNT(o.id) AS orders, SUM(o.amount) AS total "
        "FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name"
    ),
    "no_returns": (
        "SELECT c.id, c.region FROM customers c WHERE NOT EXISTS "
        "(SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.status = 'returned')"
    ),
    "top_orders": "SELECT id, customer_id, amount FROM orders ORDER BY amount DESC, id LIMIT 100",
    "top_customers": (
        "SELECT customer_id, SUM(amount) AS total FROM orders GROUP BY customer_id "
        "ORDER BY total DESC, customer_id LIMIT 10"
    ),
}
ISSUE_9 = "per_customer,no_returns"
"""The default views: issue #9's targets (``--views top_orders,top_customers`` for top-k)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--views", default=ISSUE_9,
                        help=f"comma-separated, of: {', '.join(VIEWS)}")
    args = parser.parse_args()
    views = {name: VIEWS[name] for name in args.views.split(",")}
    spec = WORKLOADS["decimal"]
    ddl = DDL.format(amount=spec.amount_type)
    console = Console()
    work = Workload(spec, args.rows, args.customers)
    customers = work.customer_table()
    db = ivm.connect()
    db.execute(ddl)
    start = time.perf_counter()
    db.ingest({"customers": customers, "orders": work.live})
    for view, sql in views.items():
        db.execute(f"CREATE VIEW {view} AS {sql}")
    console.print(f"loaded {args.rows:,} orders and created the views in "
                  f"{time.perf_counter() - start:.1f} s")
    plain = duckdb.connect()
    plain.execute(ddl)
    plain.register("o", work.live)
    plain.register("c", customers)
    plain.execute("INSERT INTO orders SELECT * FROM o; INSERT INTO customers SELECT * FROM c")

    table = Table(title=f"ivm vs recompute, {args.rows:,} orders: {', '.join(views)}")
    for column in ("changed rows", "ivm epoch (ms)", "recompute (ms)", "speed-up",
                   "apply + recompute (ms)", "speed-up"):
        table.add_column(column, justify="right")
    for size in (int(s) for s in args.sizes.split(",")):
        inc, rec, both = time_epochs(db, plain, work, views, size, args.repeats)
        table.add_row(f"{size:,}", f"{inc * 1000:.1f}", f"{rec * 1000:.1f}", f"{rec / inc:.1f}x",
                      f"{both * 1000:.1f}", f"{both / inc:.1f}x")
    console.print(table)
    for view, sql in views.items():
        problem = difference(db.read(view), plain.sql(sql).to_arrow_table())
        assert problem is None, f"{view} differs from recomputation: {problem}"
    console.print("both views equal recomputation after the run")
    db.close()
    plain.close()


if __name__ == "__main__":
    main()
