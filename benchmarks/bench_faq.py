"""Benchmark: a factorized aggregate over a fan-out chain of four tables, against the flat plan
and DuckDB recomputing.

Four tables ``r1(a, b, v) ⋈ r2(b, c, v) ⋈ r3(c, d, v) ⋈ r4(d, e, v)`` of ``--rows`` rows
each, join keys drawn from ``--keys`` values, so the chain's join holds about
rows⁴ / keys³ rows (printed, with its ratio to the inputs). One view:

    SELECT r1.a, r4.e, SUM(r1.v * r2.v * r3.v * r4.v) AS s, COUNT(*) AS n
    FROM r1 JOIN r2 ON r1.b = r2.b JOIN r3 ON r2.c = r3.c JOIN r4 ON r3.d = r4.d
    GROUP BY r1.a, r4.e

created over the loaded tables, once with ``aggregate_plan = "factorized"`` (a tree of
partial aggregates, ``ivm.passes.factorize``) and once ``"flat"`` (the aggregate over the
n-way delta join). Each epoch changes ``--changes`` rows spread over the four tables (half
deletes of existing rows, half new rows). Printed: the time to create the view (its first
load), the median epoch, and the state the session holds (``db.stats()``), against DuckDB
running the view's query over plain tables holding the same rows. The view must equal
DuckDB's answer at the end.

With ``--spark``, the same in Spark mode (``local[2]``, ``--partitions`` partitions,
state in a temporary folder): there the flat plan is binary joins, which keep each
intermediate join result as state, and the state column is the partitions' files.

    .venv/bin/python benchmarks/bench_faq.py [--rows 20000] [--keys 1500] [--changes 100]
        [--spark] [--partitions 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from bench_spark import spark_session  # the same Spark configuration
from rich.console import Console
from rich.table import Table

import ivm

TABLES = ("r1", "r2", "r3", "r4")
COLUMNS = {"r1": ("a", "b"), "r2": ("b", "c"), "r3": ("c", "d"), "r4": ("d", "e")}
VIEW = (
    "SELECT r1.a, r4.e, SUM(r1.v * r2.v * r3.v * r4.v) AS s, COUNT(*) AS n "
    "FROM r1 JOIN r2 ON r1.b = r2.b JOIN r3 ON r2.c = r3.c JOIN r4 ON r3.d = r4.d "
    "GROUP BY r1.a, r4.e"
)
GROUPS = 50
"""Values of ``a`` and of ``e`` (the view's groups: at most GROUPS²)."""


class Chain:
    """The four tables' live rows (numpy columns), and batches changing them."""

    def __init__(self, rows: int, keys: int, seed: int = 11) -> None:
        self.rng = np.random.default_rng(seed)
        self.keys = keys
        self.live = {t: self._draw(t, rows) for t in TABLES}

    def _draw(self, table: str, n: int) -> dict[str, np.ndarray]:
        first, second = COLUMNS[table]
        domain = {"a": GROUPS, "e": GROUPS}
        return {
            first: self.rng.integers(0, domain.get(first, self.keys), n, dtype=np.int64),
            second: self.rng.integers(0, domain.get(second, self.keys), n, dtype=np.int64),
            "v": self.rng.integers(1, 10, n, dtype=np.int64),
        }

    def table(self, name: str) -> pa.Table:
        return pa.table(self.live[name])

    def batch(self, changes: int) -> dict[str, pa.Table]:
        """``changes`` changed rows over the four tables: half deletes, half inserts."""
        out = {}
        for table in TABLES:
            n = changes // len(TABLES)
            columns = self.live[table]
            size = len(columns["v"])
            gone = self.rng.choice(size, n // 2, replace=False)
            new = self._draw(table, n - n // 2)
            minus = {c: v[gone] for c, v in columns.items()}
            keep = np.ones(size, bool)
            keep[gone] = False
            self.live[table] = {c: np.concatenate([v[keep], new[c]]) for c, v in columns.items()}
            weights = np.concatenate([np.full(len(gone), -1), np.ones(n - n // 2, np.int64)])
            rows = {c: np.concatenate([minus[c], new[c]]) for c in columns}
            out[table] = pa.table({**rows, "__w": weights})
        return out


def ddl() -> str:
    return "; ".join(
        f"CREATE TABLE {t} ({COLUMNS[t][0]} BIGINT, {COLUMNS[t][1]} BIGINT, v BIGINT)"
        for t in TABLES
    )


def recompute(plain: duckdb.DuckDBPyConnection, chain: Chain) -> tuple[float, pa.Table]:
    for table in TABLES:
        plain.register(f"{table}_rows", chain.table(table))
        plain.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM {table}_rows")
    start = time.perf_counter()
    result = plain.execute(f"CREATE OR REPLACE TABLE answer AS {VIEW}")
    seconds = time.perf_counter() - start
    del result
    return seconds, plain.sql("SELECT * FROM answer").to_arrow_table()


def connect(args: argparse.Namespace, spark: Any) -> ivm.Session:
    if spark is None:
        return ivm.connect()
    folder = tempfile.mkdtemp(prefix="bench-faq-")
    return ivm.connect(folder, spark=spark, partitions=args.partitions)


def run(plan: str, args: argparse.Namespace, console: Console, spark: Any) -> dict[str, float]:
    chain = Chain(args.rows, args.keys)
    plain = duckdb.connect()
    join_rows = None
    with connect(args, spark) as db:
        db.aggregate_plan = plan
        db.execute(ddl())
        db.ingest({t: chain.table(t) for t in TABLES})
        start = time.perf_counter()
        db.execute(f"CREATE VIEW chain AS {VIEW}")
        created = time.perf_counter() - start
        epochs, recomputes = [], []
        for _ in range(args.repeats):
            batch = chain.batch(args.changes)
            start = time.perf_counter()
            db.ingest(batch)
            epochs.append(time.perf_counter() - start)
            seconds, answer = recompute(plain, chain)
            recomputes.append(seconds)
        join_rows = plain.execute(
            "SELECT COUNT(*) FROM r1 JOIN r2 ON r1.b = r2.b JOIN r3 ON r2.c = r3.c "
            "JOIN r4 ON r3.d = r4.d").fetchall()[0][0]
        ours = db.read("chain")
        keys = [("a", "ascending"), ("e", "ascending")]
        if not ours.sort_by(keys).equals(answer.cast(ours.schema).sort_by(keys)):
            raise SystemExit(f"{plan}: the view differs from DuckDB's answer")
        stats = db.stats()
        state = sum(s.state_bytes + (s.memory_bytes or 0) for s in stats.values())
        inputs = sum(stats[t].state_bytes for t in TABLES)
    console.print(f"{plan}: the join holds {join_rows:,} rows "
                  f"({join_rows / (4 * args.rows):.0f}x the inputs); equal to DuckDB")
    return {"created": created, "epoch": statistics.median(epochs),
            "recompute": statistics.median(recomputes), "state": state, "inputs": inputs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=1_500)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--spark", action="store_true")
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()
    console = Console()
    spark = spark_session("local[2]", "6g") if args.spark else None
    mode = f"Spark mode, {args.partitions} partitions" if spark is not None else "embedded"
    table = Table(title=f"SUM over a 4-table chain, {args.rows:,} rows each, "
                        f"{args.changes} changed rows an epoch ({mode})")
    for column in ("plan", "create view (s)", "epoch (ms)", "DuckDB query (ms)", "speed-up",
                   "state (MB)", "state / inputs"):
        table.add_column(column, justify="right")
    for plan in ("factorized", "flat"):
        r = run(plan, args, console, spark)
        table.add_row(plan, f"{r['created']:.2f}", f"{1000 * r['epoch']:.1f}",
                      f"{1000 * r['recompute']:.1f}", f"{r['recompute'] / r['epoch']:.1f}x",
                      f"{r['state'] / 1e6:.1f}", f"{r['state'] / max(r['inputs'], 1):.1f}x")
    console.print(table)


if __name__ == "__main__":
    main()
