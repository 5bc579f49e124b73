"""Benchmark: flat maps (UNNEST, PIVOT) and decorrelated LATERAL joins against recomputation.

The tables of ``bench_aggregate`` (1M ``orders`` by default, DECIMAL amounts, 50k
``customers``), one view at a time:

* ``split``: each order's status split into parts (``unnest(string_split(…))`` in FROM):
  a flat map, linear, no state;
* ``pivoted``: PIVOT of the amounts by status, per customer (a GROUP BY with FILTERed
  SUMs);
* ``top2``: each customer's two largest orders (``LATERAL (… ORDER BY … LIMIT 2)``),
  decorrelated over the customers' ids;
* ``top2_qualify``: the same written with QUALIFY (no LATERAL), for comparison;
* ``stats``: each customer's order count and total (``LATERAL (SELECT count(*), sum(…)
  …)``, one row per customer even without orders).

Each epoch changes N orders (1k / 10k): half new orders, 30 % updates, 20 % deletes. The
incremental time is the whole ``db.ingest`` call; the baseline is DuckDB recomputing the
view over plain tables holding the same data, in the same process (and, apart, with the
batch's own DELETE + INSERT into those tables added). At the end each view must equal
recomputation.

    .venv/bin/python benchmarks/bench_from_clause.py [--rows 1000000] [--repeats 5]
        [--views split,pivoted,top2,stats]
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
    "split": "SELECT o.id, u.part FROM orders o, unnest(string_split(o.status, 'e')) AS u(part)",
    "pivoted": "PIVOT orders ON status IN ('open', 'shipped', 'returned') USING sum(amount) "
               "GROUP BY customer_id",
    "top2": "SELECT c.id, t.id AS order_id, t.amount FROM customers c, LATERAL (SELECT o.id, "
            "o.amount FROM orders o WHERE o.customer_id = c.id ORDER BY o.amount DESC, o.id "
            "LIMIT 2) AS t",
    "top2_qualify": "SELECT o.customer_id, o.id, o.amount FROM orders o QUALIFY row_number() "
                    "OVER (PARTITION BY o.customer_id ORDER BY o.amount DESC, o.id) <= 2",
    "stats": "SELECT c.id, t.n, t.total FROM customers c, LATERAL (SELECT count(*) AS n, "
             "sum(o.amount) AS total FROM orders o WHERE o.customer_id = c.id) AS t",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--views", default=",".join(VIEWS))
    args = parser.parse_args()
    spec = WORKLOADS["decimal"]
    ddl = DDL.format(amount=spec.amount_type)
    console = Console()
    table = Table(title=f"ivm vs recompute, {args.rows:,} orders, one view at a time")
    for column in ("view", "changed rows", "ivm epoch (ms)", "recompute (ms)", "speed-up",
                   "apply + recompute (ms)", "speed-up"):
        table.add_column(column, justify="right")
    for view in args.views.split(","):
        views = {view: VIEWS[view]}
        work = Workload(spec, args.rows, args.customers)
        customers = work.customer_table()
        db = ivm.connect()
        db.execute(ddl)
        db.ingest({"customers": customers, "orders": work.live})
        start = time.perf_counter()
        db.execute(f"CREATE VIEW {view} AS {VIEWS[view]}")
        console.print(f"{view}: created over {args.rows:,} orders in "
                      f"{time.perf_counter() - start:.1f} s")
        plain = duckdb.connect()
        plain.execute(ddl)
        plain.register("o", work.live)
        plain.register("c", customers)
        plain.execute("INSERT INTO orders SELECT * FROM o; INSERT INTO customers SELECT * FROM c")
        for size in (int(s) for s in args.sizes.split(",")):
            inc, rec, both = time_epochs(db, plain, work, views, size, args.repeats)
            table.add_row(view, f"{size:,}", f"{inc * 1000:.1f}", f"{rec * 1000:.1f}",
                          f"{rec / inc:.1f}x", f"{both * 1000:.1f}", f"{both / inc:.1f}x")
        problem = difference(db.read(view), plain.sql(VIEWS[view]).to_arrow_table())
        assert problem is None, f"{view} differs from recomputation: {problem}"
        db.close()
        plain.close()
    console.print(table)
    console.print("every view equals recomputation after the run")


if __name__ == "__main__":
    main()
